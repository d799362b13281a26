"""One module per platform: the typed backend the operators carry the supervisor's commands out through
(:mod:`.base`: find, submit, look, end, release), and what the provider reads of the platform's resources,
shared by the operators, triggers, sensors and the reconciler (docs/architecture.md)."""
