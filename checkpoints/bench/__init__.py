"""The checkpoint store benchmark (`manage.py bench_checkpoints`): workload, database, measures."""
