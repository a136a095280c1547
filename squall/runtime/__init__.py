"""Engine-neutral execution logic: task plan, routing, collectors, acker, metrics."""
