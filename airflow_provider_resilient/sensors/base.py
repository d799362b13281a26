"""What the provider's sensors share: poke in the worker, or -- ``deferrable`` -- free the worker slot between looks,
coming back through the one ``execute_complete``."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue

from ..compat import conf


class DeferrableSensor(BaseSensorOperator):
    """Base of the provider's sensors.

    Args:
        deferrable: wait in the triggerer between looks (default ``[operators] default_deferrable``).
        gcp_conn_id, impersonation_chain: credentials and the emulator switch, as for the operators.

    A subclass pokes (``poke``); it may wait in a trigger of its own between looks (:meth:`_defer`, default a
    ``DateTimeTrigger`` ``poke_interval`` seconds on) and say what that trigger's event means (:meth:`_resumed`).
    """

    def __init__(self, *, deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
                 gcp_conn_id: str | None = "google_cloud_default",
                 impersonation_chain: str | Sequence[str] | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.deferrable = deferrable
        self.gcp_conn_id = gcp_conn_id
        self.impersonation_chain = impersonation_chain

    def execute(self, context: Any) -> Any:
        from ..hooks.base import GoogleApiHook

        self.log.info("%s", GoogleApiHook(self.gcp_conn_id, self.impersonation_chain).endpoint_summary())
        if not self.deferrable:
            return self._result(super().execute(context))
        return self.execute_complete(context)

    def execute_complete(self, context: Any, event: Any = None) -> Any:
        """Look (again): done -> the sensor's result; else wait in the triggerer (:meth:`_defer`), which brings the
        task back here."""
        done, value = self._resumed(context, event)
        if done:
            return self._result(value)
        self._defer(context)
        return None

    def _resumed(self, context: Any, event: Any) -> tuple[bool, Any]:
        """``(done, XCom value)`` after a wait: one poke (a ``PokeReturnValue`` or a bool)."""
        result = self.poke(context)
        if isinstance(result, PokeReturnValue):
            return bool(result.is_done), result.xcom_value
        return bool(result), None

    def _result(self, value: Any) -> Any:
        """The task's return value once done (default: the poke's XCom value)."""
        return value

    def _defer(self, context: Any) -> None:
        """Wait ``poke_interval`` seconds in a ``DateTimeTrigger``."""
        from airflow.providers.standard.triggers.temporal import DateTimeTrigger

        moment = datetime.now(tz=UTC) + timedelta(seconds=float(self.poke_interval))
        self.defer(trigger=DateTimeTrigger(moment=moment), method_name="execute_complete")


__all__ = ["DeferrableSensor"]
