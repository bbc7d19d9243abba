"""Scale-out on Dask: a cluster to run on, embedding in parallel partitions, sharded dense search, and
evaluations partitioned across workers."""
