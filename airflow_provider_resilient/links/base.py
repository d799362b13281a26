"""What the provider's extra links share: Airflow 3 reads an extra link from XCom under the link's
``xcom_key``; each operator pushes the full URL there when an attempt is submitted, so its links always point
at the live job or node."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink


class XComLink(BaseOperatorLink):
    """A link whose URL the operator pushed to XCom."""

    name = ""

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        return str(XCom.get_value(ti_key=ti_key, key=self.xcom_key) or "")


__all__ = ["XComLink"]
