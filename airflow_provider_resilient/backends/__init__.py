"""One module per platform: what the provider reads of its resources, shared by the operators, triggers,
sensors and the reconciler (DESIGN.md layers: ``backends/``)."""
