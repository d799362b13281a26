"""``google.cloud.aiplatform.v1.JobService`` over gRPC: CustomJob and HyperparameterTuningJob RPCs."""

from __future__ import annotations

from typing import Any

from ..calls import CallLog
from ..wire import Method, generic_handler
from .service import VertexService

SERVICE = "google.cloud.aiplatform.v1.JobService"


def job_service_handler(backend: VertexService, calls: CallLog) -> Any:
    """The generic handler for JobService, calling ``backend``'s verbs."""
    from google.cloud.aiplatform_v1.types import (
        CustomJob,
        HyperparameterTuningJob,
        job_service,
    )
    from google.longrunning import operations_pb2
    from google.protobuf import empty_pb2

    def by_name(r: Any) -> tuple[str, str]:
        return f"name={r.name}", r.name

    def create_summary(field: str) -> Any:
        def summary(r: Any) -> tuple[str, str]:
            job = getattr(r, field)
            labels = ",".join(f"{k}={v}" for k, v in sorted(job.labels.items()))
            return f"parent={r.parent} display_name={job.display_name} labels={labels}", r.parent
        return summary

    def list_summary(r: Any) -> tuple[str, str]:
        return f"parent={r.parent} filter={r.filter!r} page_size={r.page_size}", r.parent

    def list_custom(r: Any) -> Any:
        jobs, token = backend.list_custom_jobs(r.parent, r.filter, r.page_size, r.page_token)
        return job_service.ListCustomJobsResponse(custom_jobs=jobs, next_page_token=token)

    def list_tuning(r: Any) -> Any:
        jobs, token = backend.list_hyperparameter_tuning_jobs(r.parent, r.filter, r.page_size, r.page_token)
        return job_service.ListHyperparameterTuningJobsResponse(hyperparameter_tuning_jobs=jobs,
                                                                next_page_token=token)

    def cancel(verb: Any) -> Any:
        def run(r: Any) -> Any:
            verb(r.name)
            return empty_pb2.Empty()
        return run

    empty = empty_pb2.Empty.SerializeToString
    operation = operations_pb2.Operation.SerializeToString
    js = job_service
    methods = {
        "CreateCustomJob": Method(lambda r: backend.create_custom_job(r.parent, r.custom_job),
                                  js.CreateCustomJobRequest.deserialize, CustomJob.serialize,
                                  create_summary("custom_job")),
        "GetCustomJob": Method(lambda r: backend.get_custom_job(r.name), js.GetCustomJobRequest.deserialize,
                               CustomJob.serialize, by_name),
        "ListCustomJobs": Method(list_custom, js.ListCustomJobsRequest.deserialize,
                                 js.ListCustomJobsResponse.serialize, list_summary),
        "CancelCustomJob": Method(cancel(backend.cancel_custom_job), js.CancelCustomJobRequest.deserialize, empty,
                                  by_name),
        "DeleteCustomJob": Method(lambda r: backend.delete_custom_job(r.name), js.DeleteCustomJobRequest.deserialize,
                                  operation, by_name),
        "CreateHyperparameterTuningJob": Method(
            lambda r: backend.create_hyperparameter_tuning_job(r.parent, r.hyperparameter_tuning_job),
            js.CreateHyperparameterTuningJobRequest.deserialize, HyperparameterTuningJob.serialize,
            create_summary("hyperparameter_tuning_job")),
        "GetHyperparameterTuningJob": Method(lambda r: backend.get_hyperparameter_tuning_job(r.name),
                                             js.GetHyperparameterTuningJobRequest.deserialize,
                                             HyperparameterTuningJob.serialize, by_name),
        "ListHyperparameterTuningJobs": Method(list_tuning, js.ListHyperparameterTuningJobsRequest.deserialize,
                                               js.ListHyperparameterTuningJobsResponse.serialize, list_summary),
        "CancelHyperparameterTuningJob": Method(cancel(backend.cancel_hyperparameter_tuning_job),
                                                js.CancelHyperparameterTuningJobRequest.deserialize, empty, by_name),
        "DeleteHyperparameterTuningJob": Method(lambda r: backend.delete_hyperparameter_tuning_job(r.name),
                                                js.DeleteHyperparameterTuningJobRequest.deserialize, operation,
                                                by_name),
    }
    return generic_handler(SERVICE, methods, calls)
