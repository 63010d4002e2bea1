"""The S3 fixture store: each bundle is two objects under a bucket prefix, ``<hash>.case`` and
``<hash>.summary.json``.

``s3://bucket/prefix?region=…&endpoint_url=…``: those two are the only settings the URL may carry;
credentials come from the AWS SDK's own chain, never the URL (a URL with a user, a password or another
query key is refused). The driver is boto3 (``flux-tui[s3]``).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import FluxError
from .bundle import is_hash
from .stores import BLOB_SUFFIX, SUMMARY_SUFFIX, FixtureStore, StoredCase, missing

__all__ = ["S3Store", "parse_s3_url"]

_SETTINGS = ("region", "endpoint_url")


def parse_s3_url(url: str) -> tuple[str, str, dict[str, str]]:
    """``(bucket, prefix, {region, endpoint_url})`` of an ``s3://`` URL."""
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None:
        raise FluxError("an s3:// fixture store URL never carries credentials — they come from the AWS SDK chain "
                        "(AWS_ACCESS_KEY_ID / AWS_PROFILE / an instance role)")
    bucket = parts.hostname or ""
    if not bucket:
        raise FluxError(f"{url}: name the bucket (s3://bucket/prefix)")
    query = parse_qs(parts.query, keep_blank_values=True)
    unknown = sorted(set(query) - set(_SETTINGS))
    if unknown:
        raise FluxError(f"{url}: unknown setting(s) {', '.join(unknown)} — an s3:// URL takes only region= and "
                        f"endpoint_url= (credentials come from the AWS SDK chain)")
    settings = {k: v[-1] for k, v in query.items() if v and v[-1]}
    return bucket, parts.path.strip("/"), settings


def _driver() -> Any:
    try:
        import boto3
        import botocore.exceptions
    except ImportError:
        raise FluxError("an s3:// fixture store needs boto3 — pip install 'flux-tui[s3]'") from None
    return boto3, botocore.exceptions


class S3Store(FixtureStore):
    def __init__(self, url: str):
        boto3, self.errors = _driver()
        self.bucket, self.prefix, settings = parse_s3_url(url)
        self.url = url
        self.client = boto3.session.Session().client(
            "s3", region_name=settings.get("region"), endpoint_url=settings.get("endpoint_url"))

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def _fail(self, e: Exception, what: str) -> FluxError:
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return FluxError(f"s3 fixture store {self.bucket}: cannot {what}: {first}")

    def has(self, h: str) -> bool:
        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(h + BLOB_SUFFIX))
            return True
        except self.errors.ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise self._fail(e, f"look up {h[:16]}…") from None
        except self.errors.BotoCoreError as e:
            raise self._fail(e, "reach the server") from None

    def _write(self, h: str, blob: bytes, summary: dict) -> None:
        try:
            self.client.put_object(Bucket=self.bucket, Key=self._key(h + SUMMARY_SUFFIX),
                                   Body=json.dumps(summary, sort_keys=True).encode("utf-8"))
            self.client.put_object(Bucket=self.bucket, Key=self._key(h + BLOB_SUFFIX), Body=blob)
        except (self.errors.ClientError, self.errors.BotoCoreError) as e:
            raise self._fail(e, f"write {h[:16]}…") from None

    def read_blob(self, h: str) -> bytes:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(h + BLOB_SUFFIX))["Body"].read()
        except self.errors.ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                raise missing(h, self.url) from None
            raise self._fail(e, f"read {h[:16]}…") from None
        except self.errors.BotoCoreError as e:
            raise self._fail(e, "reach the server") from None

    def entries(self) -> list[StoredCase]:
        out = []
        start = self._key("")
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=start)
            for page in pages:
                for obj in page.get("Contents", []):
                    name = obj["Key"][len(start):]
                    h = name[: -len(BLOB_SUFFIX)]
                    if not name.endswith(BLOB_SUFFIX) or not is_hash(h):
                        continue
                    try:
                        body = self.client.get_object(Bucket=self.bucket, Key=self._key(h + SUMMARY_SUFFIX))["Body"]
                        summary = json.loads(body.read())
                    except (self.errors.ClientError, ValueError):
                        summary = {}
                    out.append(StoredCase(h, int(obj["Size"]), summary if isinstance(summary, dict) else {}))
        except (self.errors.ClientError, self.errors.BotoCoreError) as e:
            raise self._fail(e, "list the bundles") from None
        return out

    def _remove(self, h: str) -> bool:
        found = self.has(h)
        try:
            self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": [
                {"Key": self._key(h + BLOB_SUFFIX)}, {"Key": self._key(h + SUMMARY_SUFFIX)}]})
        except (self.errors.ClientError, self.errors.BotoCoreError) as e:
            raise self._fail(e, f"delete {h[:16]}…") from None
        return found
