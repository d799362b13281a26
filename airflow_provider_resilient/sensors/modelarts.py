"""``ModelArtsTrainingJobSensor``: wait until a Huawei Cloud ModelArts training job reaches a terminal phase."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..compat import AirflowFailException
from .base import DeferrableSensor

DEFAULT_TARGET_PHASES = ("Completed",)


class ModelArtsTrainingJobSensor(DeferrableSensor):
    """Wait for training job ``job_id`` to reach one of ``target_phases``; fail if it ends in another terminal phase
    (ModelArts phases: Creating, Pending, Running, Failed, Completed, Terminating, Terminated, Abnormal).

    Args:
        job_id: the training job's id, or the provider's name ``modelarts/<region>/<project>/<id>`` (templated; e.g.
            from the operator's XCom ``job_name``).
        target_phases: phases that count as done (default ``Completed``).
        huaweicloud_conn_id: the Airflow connection (:mod:`..hooks.modelarts`).
        region: the job's region (None: the connection's, or the one in ``job_id``).
        deferrable: free the worker slot between looks (a ``DateTimeTrigger`` every ``poke_interval`` seconds).

    Returns the job's summary (:func:`~..backends.modelarts.job_summary`) as XCom.

    Raises:
        AirflowFailException: the job ended in a terminal phase not in ``target_phases`` (no retry helps), or a
            target phase is not a ModelArts phase.
    """

    template_fields: Sequence[str] = ("job_id", "region")

    def __init__(self, *, job_id: str, target_phases: Sequence[str] = DEFAULT_TARGET_PHASES,
                 huaweicloud_conn_id: str = "huaweicloud_default", region: str | None = None, **kwargs: Any) -> None:
        from ..policy.job_states import MODELARTS_TERMINAL_PHASES

        kwargs.setdefault("gcp_conn_id", None)
        super().__init__(**kwargs)
        phases = MODELARTS_TERMINAL_PHASES | {"Creating", "Pending", "Running", "Terminating"}
        unknown = [p for p in target_phases if p not in phases]
        if unknown:
            raise AirflowFailException(f"ModelArtsTrainingJobSensor {self.task_id}: target_phases {unknown} are not "
                                       f"ModelArts phases; use some of {sorted(phases)}")
        self.job_id = job_id
        self.target_phases = tuple(target_phases)
        self.huaweicloud_conn_id = huaweicloud_conn_id
        self.region = region
        self._summary: dict[str, Any] | None = None

    def execute(self, context: Any) -> Any:
        self.log.info("%s", self._hook().endpoint_summary())
        if not self.deferrable:
            return self._result(super(DeferrableSensor, self).execute(context))
        return self.execute_complete(context)

    def _hook(self) -> Any:
        from ..hooks.modelarts import ResilientModelArtsHook, region_of

        return ResilientModelArtsHook(self.huaweicloud_conn_id, self.region or region_of(self.job_id))

    def poke(self, context: Any) -> bool:
        from ..backends.modelarts import read_summary
        from ..policy.job_states import MODELARTS_TERMINAL_PHASES

        summary = read_summary(self._hook(), self.job_id)
        if summary["state"] in self.target_phases:
            self._summary = summary
            return True
        if summary["state"] in MODELARTS_TERMINAL_PHASES:
            raise AirflowFailException(f"{self.job_id} ended {summary['state']}, not one of "
                                       f"{list(self.target_phases)}: {summary.get('error_message') or ''}")
        return False

    def _result(self, value: Any) -> Any:
        return self._summary


__all__ = ["DEFAULT_TARGET_PHASES", "ModelArtsTrainingJobSensor"]
