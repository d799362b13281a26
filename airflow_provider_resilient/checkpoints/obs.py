"""``obs://bucket/key``: Huawei Cloud Object Storage Service (OBS) as an fsspec filesystem, over s3fs.

OBS answers the Amazon S3 REST API ("OBS REST APIs are compatible with most Amazon S3 APIs", with a table of the
operations: https://docs.otc.t-systems.com/api_obs/obs/en-us_topic_0125560315.html, the OBS API reference as
published for Open Telekom Cloud, which runs Huawei's OBS), so :class:`ObsFileSystem` is ``s3fs.S3FileSystem`` with
its own protocol and Huawei's configuration rules. fsspec finds it through this package's ``fsspec.specs`` entry
point (pyproject.toml), so ``fsspec.core.url_to_fs("obs://bucket/key")`` works wherever the package is installed;
this module -- and s3fs -- is imported only when an ``obs://`` URL is resolved.

Where each setting comes from, first found wins:

* endpoint: storage option ``endpoint_url``; env ``OBS_ENDPOINT``; ``https://obs.{region}.myhuaweicloud.com`` from env
  ``OBS_REGION`` or ``HUAWEICLOUD_REGION`` (the regional endpoint's form:
  https://support.huaweicloud.com/en-us/devg-obs/obs_06_0007.html). An endpoint without a scheme gets ``https://``
  (Huawei advises HTTPS: https://support.huaweicloud.com/intl/en-us/sdk-python-devg-obs/obs_22_0601.html).
* credentials: storage options ``key`` / ``secret`` / ``token``; env ``OBS_ACCESS_KEY_ID`` /
  ``OBS_SECRET_ACCESS_KEY`` / ``OBS_SECURITY_TOKEN`` -- the names obsutil and the OBS Python SDK's ``ENV`` security
  provider read (https://support.huaweicloud.com/intl/en-us/utiltg-obs/obs_11_0067.html,
  https://support.huaweicloud.com/intl/en-us/sdk-python-devg-obs/obs_22_0601.html). Neither key nor secret: anonymous
  requests, as the SDK treats an empty AK/SK (a public bucket reads; anything else is refused by OBS with 403), never
  the AWS credential chain.
* addressing: storage option ``addressing_style`` (``"virtual"``, ``"path"`` or ``"auto"``, botocore's values);
  by default ``"virtual"`` (``bucket.obs.{region}.myhuaweicloud.com``, the bucket domain name Huawei advises:
  https://support.huaweicloud.com/intl/en-us/api-obs/obs_04_0002.html), ``"path"`` when the endpoint's host is an IP
  address or ``localhost`` (an emulator: no DNS name per bucket).
* signing region: ``client_kwargs["region_name"]``; the region of the environment; the ``{region}`` of an
  ``obs.{region}.myhuaweicloud.com`` endpoint.

botocore's default request checksums (``x-amz-checksum-*`` trailers, on since botocore 1.36) are turned to "when
required" unless ``config_kwargs`` says otherwise: S3-compatible stores do not all accept them
(https://docs.aws.amazon.com/sdkref/latest/guide/feature-dataintegrity.html).
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

try:
    from s3fs import S3FileSystem
except ImportError as exc:  # fsspec chains it under its "Unable to load filesystem" for an obs:// URL
    raise ImportError("obs:// needs s3fs, in the 'modelarts' extra: pip install 'airflow-provider-resilient[modelarts]'"
                      ) from exc

#: The environment variables read, in order of preference within each setting.
ENDPOINT_ENV = "OBS_ENDPOINT"
REGION_ENVS = ("OBS_REGION", "HUAWEICLOUD_REGION")
ACCESS_KEY_ENV = "OBS_ACCESS_KEY_ID"
SECRET_KEY_ENV = "OBS_SECRET_ACCESS_KEY"
SECURITY_TOKEN_ENV = "OBS_SECURITY_TOKEN"

ADDRESSING_STYLES = ("virtual", "path", "auto")

_REGIONAL_HOST = re.compile(r"^obs\.(?P<region>[a-z0-9-]+)\.myhuaweicloud\.com$")


def resolve_endpoint(endpoint_url: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The OBS endpoint URL (``scheme://host[:port]``) to use.

    Args:
        endpoint_url: the storage option, if given (with or without a scheme).
        environ: the environment to read (``os.environ`` by default).

    Raises:
        ValueError: when neither ``endpoint_url``, ``OBS_ENDPOINT``, ``OBS_REGION`` nor ``HUAWEICLOUD_REGION`` is set
            (non-empty): the message names ``OBS_ENDPOINT`` and how to set it.
    """
    env = os.environ if environ is None else environ
    endpoint = endpoint_url or env.get(ENDPOINT_ENV, "").strip()
    if not endpoint:
        region = next((value.strip() for name in REGION_ENVS if (value := env.get(name, "")).strip()), "")
        if not region:
            raise ValueError(
                f"obs:// needs an OBS endpoint: set {ENDPOINT_ENV} (e.g. https://obs.cn-north-4.myhuaweicloud.com), "
                f"or {REGION_ENVS[0]} / {REGION_ENVS[1]} (e.g. cn-north-4), or pass the storage option endpoint_url")
        endpoint = f"https://obs.{region}.myhuaweicloud.com"
    if "://" not in endpoint:
        endpoint = f"https://{endpoint}"
    return endpoint.rstrip("/")


def default_addressing_style(endpoint_url: str) -> str:
    """``"path"`` when the endpoint's host is an IP address or ``localhost`` (an emulator), else ``"virtual"``."""
    host = urlsplit(endpoint_url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return "path"
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return "virtual"
    return "path"


def endpoint_region(endpoint_url: str) -> str | None:
    """The region of an ``obs.{region}.myhuaweicloud.com`` endpoint, else None."""
    match = _REGIONAL_HOST.match(urlsplit(endpoint_url).hostname or "")
    return match.group("region") if match else None


def obs_options(storage_options: Mapping[str, Any], environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The ``s3fs.S3FileSystem`` keyword arguments for the given ``obs://`` storage options, with the endpoint,
    credentials, addressing style and signing region resolved as the module docstring says.

    Args:
        storage_options: the caller's options: s3fs's own (``endpoint_url``, ``key``, ``secret``, ``token``,
            ``anon``, ``client_kwargs``, ``config_kwargs``, ...) and ``addressing_style``.
        environ: the environment to read (``os.environ`` by default).

    Raises:
        ValueError: no endpoint (see :func:`resolve_endpoint`), or an ``addressing_style`` other than
            ``"virtual"``, ``"path"`` or ``"auto"``.
    """
    env = os.environ if environ is None else environ
    options = dict(storage_options)
    endpoint = resolve_endpoint(options.pop("endpoint_url", None), env)
    style = options.pop("addressing_style", None) or default_addressing_style(endpoint)
    if style not in ADDRESSING_STYLES:
        raise ValueError(f"obs:// addressing_style must be one of {', '.join(ADDRESSING_STYLES)}, got {style!r}")

    if not options.get("anon"):
        for option, name in (("key", ACCESS_KEY_ENV), ("secret", SECRET_KEY_ENV), ("token", SECURITY_TOKEN_ENV)):
            if not options.get(option) and env.get(name):
                options[option] = env[name]
        if not (options.get("key") or options.get("secret")):
            options["anon"] = True

    client_kwargs = dict(options.pop("client_kwargs", None) or {})
    region = next((value for name in REGION_ENVS if (value := env.get(name, "").strip())), None)
    region = region or endpoint_region(endpoint)
    if region:
        client_kwargs.setdefault("region_name", region)
    config_kwargs = dict(options.pop("config_kwargs", None) or {})
    config_kwargs["s3"] = {"addressing_style": style, **(config_kwargs.get("s3") or {})}
    config_kwargs.setdefault("request_checksum_calculation", "when_required")
    config_kwargs.setdefault("response_checksum_validation", "when_required")
    return {**options, "endpoint_url": endpoint, "client_kwargs": client_kwargs, "config_kwargs": config_kwargs}


class _ResolvingCache(type(S3FileSystem)):  # type: ignore[misc]
    """fsspec's instance cache, keyed by the *resolved* options: an instance made under one ``OBS_ENDPOINT`` or
    access key is not handed out again after the environment changed, and a pickled instance carries what it used."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        skip = kwargs.pop("skip_instance_cache", False)
        return super().__call__(*args, skip_instance_cache=skip, **obs_options(kwargs))


class ObsFileSystem(S3FileSystem, metaclass=_ResolvingCache):  # type: ignore[misc]
    """Huawei Cloud OBS (``obs://bucket/key``) over the Amazon S3 API, through s3fs.

    Takes ``s3fs.S3FileSystem``'s keyword arguments (``endpoint_url``, ``key``, ``secret``, ``token``, ``anon``,
    ``client_kwargs``, ``config_kwargs``, ...) plus ``addressing_style``; what is not given comes from the
    environment (the module docstring: ``OBS_ENDPOINT``, ``OBS_REGION`` / ``HUAWEICLOUD_REGION``,
    ``OBS_ACCESS_KEY_ID``, ``OBS_SECRET_ACCESS_KEY``, ``OBS_SECURITY_TOKEN``). Paths are ``bucket/key``;
    ``_strip_protocol("obs://bucket/key")`` is ``"bucket/key"`` and ``unstrip_protocol`` gives ``obs://`` URLs.

    Raises:
        ValueError: at construction, when no endpoint is given nor set in the environment (the message names
            ``OBS_ENDPOINT``), or on an unknown ``addressing_style``.
    """

    protocol = ("obs",)
