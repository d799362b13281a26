"""Pure specifications of what the operators submit (validation, labels, environment)."""
