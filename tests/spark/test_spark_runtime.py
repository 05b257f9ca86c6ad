"""``nearsim spark`` as a user runs it: quiet, sized, and stopped whole by Ctrl-C."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from nearsim.client.cli import cli
from nearsim.client.sparkrun import _py4j_connection_logs_hidden
from nearsim.spark.runtime import (
    SHUFFLE_PARTITIONS_PER_LOCAL_CORE,
    local_cores,
    local_driver_memory,
    memory_size,
    parse_conf,
)

GIB = 1 << 30


def nearsim_spark(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "nearsim.client.cli", "spark", *arguments]


def write_documents(path: Path, count: int, words: int = 120) -> None:
    """``count`` JSON Lines records of random words, every fifth one a near copy."""
    rng = random.Random(count)
    vocabulary = [f"w{n}" for n in range(5000)]
    with path.open("w") as out:
        previous: list[str] = []
        for key in range(count):
            if key % 5 == 4:
                text = previous[:-3] + rng.sample(vocabulary, 3)
            else:
                text = rng.choices(vocabulary, k=words)
            previous = text
            out.write(json.dumps({"id": key, "body": " ".join(text)}) + "\n")


def children(pid: int) -> dict[int, str]:
    """Every descendant process of ``pid``: its command line."""
    parents: dict[int, int] = {}
    commands: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat[stat.rindex(")") + 2 :].split()[1])
        commands[int(entry.name)] = command
    found: dict[int, str] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, its_parent in parents.items():
            if its_parent == parent and child not in found:
                found[child] = commands[child]
                frontier.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rindex(")") + 2] != "Z"


def test_the_memory_of_a_local_driver_is_a_third_of_the_machine() -> None:
    assert local_driver_memory(24 * GIB) == "8g"
    assert local_driver_memory(23 * GIB) == "7g"
    assert local_driver_memory(2 * GIB) == "1g"  # never below 1g
    assert local_driver_memory(512 * GIB) == "32g"  # compressed pointers end at 32g
    assert memory_size("1500M") == "1500m" and memory_size("4g") == "4g"
    with pytest.raises(ValueError, match=r"not a memory size: 'lots'"):
        memory_size("lots")
    assert parse_conf(["spark.a=1", "spark.b=x=y"]) == {"spark.a": "1", "spark.b": "x=y"}
    with pytest.raises(ValueError, match=r"not KEY=VALUE: 'spark\.a'"):
        parse_conf(["spark.a"])


@pytest.mark.parametrize(("option", "value", "named"), [
    ("--driver-memory", "lots", "--driver-memory"),
    ("--executor-memory", "0g", "--executor-memory"),
    ("--spark-conf", "spark.sql.shuffle.partitions", "--spark-conf"),
])  # fmt: skip
def test_bad_session_options_are_one_line_naming_the_option(tmp_path: Path, option: str,
                                                            value: str, named: str) -> None:
    source = tmp_path / "docs.jsonl"
    write_documents(source, 3)
    result = CliRunner().invoke(cli, ["spark", "dedup", str(source), "--key-column", "id",
                                      "--text-column", "body", "-o", str(tmp_path / "out"),
                                      option, value])  # fmt: skip
    assert result.exit_code == 2
    assert named in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_a_run_prints_its_summary_and_no_spark_log_lines(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    write_documents(source, 200)
    quiet = subprocess.run(nearsim_spark(
        "dedup", str(source), "--key-column", "id", "--text-column", "body",
        "-o", str(tmp_path / "quiet"), "--master", "local[2]",
        "--spark-conf", "spark.sql.shuffle.partitions=4", "--spark-conf", "spark.ui.enabled=false",
    ), capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert quiet.returncode == 0, quiet.stderr
    lines = quiet.stderr.splitlines()
    assert len(lines) == 3, quiet.stderr
    assert lines[0] == "200 documents (200 with a fingerprint), 0 bad rows"
    assert lines[1].startswith("40 pairs, 40 groups of 80 documents in ")
    assert lines[2:] == [f"written to {tmp_path / 'quiet'}"]
    assert quiet.stdout == ""
    few = tmp_path / "few.jsonl"  # Spark's own lines are the point here, not the work
    write_documents(few, 10)
    told = subprocess.run(nearsim_spark(
        "dedup", str(few), "--key-column", "id", "--text-column", "body",
        "-o", str(tmp_path / "told"), "--master", "local[1]", "--spark-log-level", "info",
        "--spark-conf", "spark.ui.enabled=false",
    ), capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert told.returncode == 0, told.stderr
    assert "INFO SparkContext: Running Spark version" in told.stderr
    assert told.stderr.splitlines()[-1] == f"written to {tmp_path / 'told'}"


def test_the_session_gets_the_memory_and_settings_asked_for(tmp_path: Path) -> None:
    """--driver-memory is the driver JVM's heap (set at its launch); --spark-conf reaches
    the session."""
    program = textwrap.dedent("""
        import json, sys
        from nearsim.spark import session, stop
        spark = session("local[1]", config={"spark.sql.shuffle.partitions": "7",
                                            "spark.ui.enabled": "false"},
                        driver_memory=sys.argv[1])
        runtime = spark.sparkContext._jvm.java.lang.Runtime.getRuntime()
        print(json.dumps({"heap": runtime.maxMemory(),
                          "partitions": spark.conf.get("spark.sql.shuffle.partitions")}))
        stop(spark)
    """)
    ran = subprocess.run([sys.executable, "-c", program, "700m"], capture_output=True,
                         text=True, timeout=300, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    found = json.loads(ran.stdout)
    assert 600 << 20 < found["heap"] <= 700 << 20
    assert found["partitions"] == "7"
    assert ran.stderr == ""


def test_a_local_master_gets_a_few_shuffle_partitions_per_core(tmp_path: Path) -> None:
    """Not Spark's 200, which cost a task each per stage on one machine; a value given
    (config, or --conf in PYSPARK_SUBMIT_ARGS) is kept, and other masters get none."""
    assert [local_cores(m) for m in ("local", "local[3]", "local[2, 4]", "local[*]",
                                     "local-cluster[2,1,1024]", "spark://h:7077", "yarn")] == [
        1, 3, 2, os.cpu_count(), None, None, None]
    program = textwrap.dedent("""
        import sys
        from nearsim.spark import session, stop
        spark = session(sys.argv[1], config={"spark.ui.enabled": "false"})
        print(spark.conf.get("spark.sql.shuffle.partitions"))
        stop(spark)
    """)
    for master, submit_args, expected in (
            ("local[3]", None, 3 * SHUFFLE_PARTITIONS_PER_LOCAL_CORE),
            ("local[3]", "--conf spark.sql.shuffle.partitions=5 pyspark-shell", 5)):
        env = {k: v for k, v in os.environ.items() if k != "PYSPARK_SUBMIT_ARGS"}
        if submit_args is not None:
            env["PYSPARK_SUBMIT_ARGS"] = submit_args
        ran = subprocess.run([sys.executable, "-c", program, master], capture_output=True,
                             text=True, timeout=300, check=False, env=env)  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        assert ran.stdout.strip() == str(expected), (master, submit_args, ran.stdout)


def test_ctrl_c_cancels_the_job_stops_the_jvm_and_ends_with_130(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    write_documents(source, 40_000, words=200)
    process = subprocess.Popen(nearsim_spark(
        "dedup", str(source), "--key-column", "id", "--text-column", "body",
        "-o", str(tmp_path / "never"), "--master", "local[2]", "--driver-memory", "1100m",
        "--spark-conf", "spark.ui.enabled=false",
    ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)  # fmt: skip
    try:
        # Wait for the job's Python tasks: the JVM has started a pyspark.daemon.
        deadline = time.monotonic() + 240
        started: dict[int, str] = {}
        while time.monotonic() < deadline and process.poll() is None:
            started = children(process.pid)
            if any("pyspark.daemon" in command for command in started.values()):
                break
            time.sleep(0.2)
        assert any("pyspark.daemon" in command for command in started.values()), started
        java = [pid for pid, command in started.items() if "java" in command.split(" ")[0]]
        assert java and "-Xmx1100m" in started[java[0]]
        time.sleep(1)
        started = children(process.pid)
        os.killpg(process.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
        stdout, stderr = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == 130, stderr
    assert stderr.splitlines()[-1] == "interrupted", stderr
    for shown in ("Traceback", "Exception in thread", "at org.apache", "ERROR"):
        assert shown not in stderr, stderr
    assert stdout == ""
    assert not [pid for pid in java if alive(pid)]  # the JVM ended before the command did
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(pid) for pid in started):
        time.sleep(0.2)
    assert not [command for pid, command in started.items() if alive(pid)]
    assert not (tmp_path / "never").exists()


def test_after_ctrl_c_the_jvm_logs_nothing() -> None:
    """Work an interrupted call left running in the JVM (a broadcast being stored)
    fails as the context stops, and logs ERROR: after Ctrl-C nothing the JVM logs
    is shown, whenever it comes."""
    program = textwrap.dedent("""
        from nearsim.spark import session, stop, runtime
        spark = session("local[1]", config={"spark.ui.enabled": "false"},
                        driver_memory="600m")
        log = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager.getLogger(
            "org.apache.spark.broadcast.TorrentBroadcast")
        log.error("before Ctrl-C")
        runtime._cancel_aside(spark.sparkContext, 30)  # what an interrupted stop does first
        log.error("after Ctrl-C")
        stop(spark)
    """)
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=300, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert "ERROR TorrentBroadcast: before Ctrl-C" in ran.stderr
    assert "after Ctrl-C" not in ran.stderr, ran.stderr


def test_py4j_connection_errors_it_logs_on_the_root_logger_are_not_shown(
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """A broken connection Py4J retries, or one of its garbage collector's calls,
    is logged on the root logger with a traceback while the command goes on; a
    call that fails raises in the command (one line) all the same."""
    handler = logging.StreamHandler()  # as logging.exception() installs when none is set
    logging.getLogger().addHandler(handler)
    try:
        with _py4j_connection_logs_hidden():
            try:
                raise ConnectionResetError("the JVM went away")
            except ConnectionResetError:
                logging.exception("Exception while sending command.")
                logging.exception("KeyboardInterrupt while sending command.")
            logging.error("a message of the command's own")
    finally:
        logging.getLogger().removeHandler(handler)
    shown = capsys.readouterr().err
    assert "sending command" not in shown and "ConnectionResetError" not in shown
    assert "a message of the command's own" in shown


def test_no_py4j_log_while_the_session_and_its_jvm_stop() -> None:
    """A call Py4J logs as broken while a command's session and JVM stop (after the
    job, before the summary) is not shown: the stop's failures are no news."""
    program = textwrap.dedent("""
        import logging
        import click
        import nearsim.spark.runtime as runtime
        from nearsim.client.sparkrun import session_options, spark_session
        real_stop = runtime.stop

        def stop_with_a_broken_call(*arguments, **options):
            try:
                raise ConnectionResetError("the JVM went away")
            except ConnectionResetError:
                logging.exception("Exception while sending command.")
            real_stop(*arguments, **options)

        runtime.stop = stop_with_a_broken_call

        @click.command()
        @session_options
        @click.pass_context
        def command(ctx):
            with spark_session(ctx, "local[1]") as spark:
                assert spark.range(5).count() == 5
            logging.error("the program's own error")

        command(["--spark-conf", "spark.ui.enabled=false"], standalone_mode=False)
    """)
    ran = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         timeout=300, check=False)  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.splitlines() == ["ERROR:root:the program's own error"]
