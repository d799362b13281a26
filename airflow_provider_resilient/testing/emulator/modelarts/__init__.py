"""Huawei Cloud ModelArts training jobs (REST API v2), served so that the official SDK ``huaweicloudsdkmodelarts``
(``ModelArtsClient`` pointed at :attr:`~..server.Emulator.modelarts_url`) drives them: :mod:`.service` holds the jobs
and their verbs, :mod:`.runs` one job's life on the platform, :mod:`.wire` the HTTP server, :mod:`.errors` the API's
error codes and :mod:`.catalog` the flavors."""
