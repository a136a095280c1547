"""What the Spark engine runs, read from a topology before anything starts: the plan of
a core topology (:mod:`.core`) and of a Trident or transactional one (:mod:`.batch`),
with the checks that what travels to executors can be pickled (:mod:`.pickling`).

Runs on the driver, at ``submit_topology``.
"""
