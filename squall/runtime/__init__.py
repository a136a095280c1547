"""Engine-neutral execution logic: task plan, routing, collectors, acker, task runners,
the coordination store, metrics, and the hooks components may implement for engines."""
