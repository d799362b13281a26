"""The legacy trainer package, as ``gcloud ai-platform jobs submit training --package-path trainer`` built it."""

from setuptools import find_packages, setup

setup(name="trainer", version="0.2", packages=find_packages(), install_requires=[])
