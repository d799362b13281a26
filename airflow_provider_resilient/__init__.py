"""airflow-provider-resilient: ML training on Vertex AI and Cloud TPU that finishes despite failures.

Importing this package is cheap: it imports neither Airflow nor the Google client libraries. Those are
imported by the operator, hook and trigger modules, and by those only inside the functions that need
them.
"""

__version__ = "0.1.0"
