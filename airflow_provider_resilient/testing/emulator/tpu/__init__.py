"""Cloud TPU (``google.cloud.tpu.v2.Tpu``) in the emulator: nodes, queued resources, worker VMs."""
