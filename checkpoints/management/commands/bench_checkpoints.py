"""Benchmark the checkpoint store on a realistic agent workload, in a database of its own."""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from checkpoints.bench.database import bench_database
from checkpoints.bench.run import run


class Command(BaseCommand):
    help = (
        "Write N threads of T turns through the ORM backend (W at once), each checkpoint committed "
        "before the next, and report write rate and latency, head loads, history pages and "
        "storage, beside the same machine's raw single-row INSERT+COMMIT rate. Uses (and drops) "
        "its own database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--turns", type=int, default=200)
        parser.add_argument("--threads", type=int, default=5)
        parser.add_argument(
            "--writers",
            type=int,
            default=1,
            help="threads written at once, each on a connection of its own (commits share WAL flushes)",
        )
        parser.add_argument("--history-size", type=int, default=10_000, help="0 skips the long thread")
        parser.add_argument("--raw-rows", type=int, default=2_000)
        parser.add_argument("--database", default="gatehouse_bench", help="Postgres database to create")
        parser.add_argument("--keep-db", action="store_true")
        parser.add_argument("--json", action="store_true", help="print one JSON object")

    def handle(self, *args: Any, **options: Any) -> None:
        with bench_database(name=options["database"], keep=options["keep_db"]):
            result = run(
                turns=options["turns"],
                threads=options["threads"],
                writers=options["writers"],
                history_size=options["history_size"],
                raw_rows=options["raw_rows"],
            )
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        for key, value in result.items():
            self.stdout.write(f"{key:36} {value}")
