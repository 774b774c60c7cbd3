"""SAVE of one unit (1 department + N employees): recordsd against psql \\copy (the physical
limit) and SQLAlchemy's ORM Session over psycopg (a well-known unit of work), side by side."""
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

from client import Client, rss_kib

PGURL = os.environ["PGURL"]
PORT = int(os.environ["RECORDSD_PORT"])
PID = int(os.environ["RECORDSD_PID"])
N = int(os.environ.get("BENCH_ROWS", "10000"))
REPEAT = int(os.environ.get("BENCH_REPEAT", "9"))


def psql(sql):
    subprocess.run(["psql", PGURL, "-qXc", sql], check=True, stdout=subprocess.DEVNULL)


def reset(prefix=""):
    psql(f"TRUNCATE {prefix}employee, {prefix}department RESTART IDENTITY CASCADE")


def employee_values(i):
    return f"Emp{i}", f"Family{i % 977}", 1 + i % 2, 20 + i % 45


def run_recordsd(prefix=""):
    """The unit as a program sends it (bench/unitclient.c, C): the lines pipelined, every
    status read, then SAVE; returns the seconds of each part."""
    reset(prefix)
    lines = [f'INSERT {prefix}department AS #d name="Sales" number=1']
    for i in range(N):
        first, last, gender, age = employee_values(i)
        lines.append(f'INSERT {prefix}employee first_name="{first}" last_name="{last}" gender={gender} age={age} department=#d')
    out = subprocess.run([os.path.join(os.environ["BENCH_TMP"], "unitclient"), str(PORT), f"+OK saved: {N + 1} inserted"],
                         input="".join(line + "\n" for line in lines).encode(), capture_output=True)
    if out.returncode != 0:
        sys.exit(out.stderr.decode())
    out = out.stdout
    edit, save = (float(x) for x in out.split())
    return edit, save


def run_copy(prefix=""):
    reset(prefix)
    # The uuid-keyed copy: the department's key given, each employee's from its default.
    department = str(uuid.uuid4()) if prefix else "1"
    with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
        for i in range(N):
            first, last, gender, age = employee_values(i)
            f.write(f"{first},{last},{gender},{age},{department}\n")
        path = f.name
    insert = (f"INSERT INTO {prefix}department (id, name, number) VALUES ('{department}', 'Sales', 1);" if prefix
              else "INSERT INTO department (name, number) VALUES ('Sales', 1);")
    script = (f"BEGIN;\n{insert}\n"
              f"\\copy {prefix}employee (first_name, last_name, gender, age, department_id) FROM '{path}' CSV\nCOMMIT;\n")
    start = time.perf_counter()
    subprocess.run(["psql", PGURL, "-qX", "-v", "ON_ERROR_STOP=1"], input=script.encode(), check=True, stdout=subprocess.DEVNULL)
    elapsed = time.perf_counter() - start
    os.unlink(path)
    return elapsed


def run_sqlalchemy(python):
    reset()
    out = subprocess.run([python, os.path.join(os.path.dirname(__file__), "sqlalchemy_unit.py"), PGURL, str(N)],
                         check=True, capture_output=True, text=True).stdout
    return float(out.strip())


def memory_per_insert(count=100_000):
    client = Client(PORT)
    client.send("PING")
    before = rss_kib(PID)
    batch = []
    value_bytes = 0
    for i in range(count):
        first, last, gender, age = employee_values(i)
        value_bytes += len(first) + len(last) + len(str(gender)) + len(str(age))
        batch.append(f'INSERT employee first_name="{first}" last_name="{last}" gender={gender} age={age}')
        if len(batch) == 10_000:
            client.send_many(batch)
            batch = []
    time.sleep(0.2)
    after = rss_kib(PID)
    client.send("ROLLBACK")
    per = (after - before) * 1024 / count
    return per, value_bytes / count


def main():
    python = sys.argv[1]
    rec_edit, rec_save, copies, alchemy, uuid_save, uuid_copies = [], [], [], [], [], []
    for _ in range(REPEAT):
        edit, save = run_recordsd()
        rec_edit.append(edit)
        rec_save.append(save)
        copies.append(run_copy())
        alchemy.append(run_sqlalchemy(python))
        uuid_save.append(run_recordsd("u_")[1])
        uuid_copies.append(run_copy("u_"))
    med = statistics.median
    save, copy, orm, edit = med(rec_save), med(copies), med(alchemy), med(rec_edit)
    unit = med([e + s for e, s in zip(rec_edit, rec_save)])
    usave, ucopy = med(uuid_save), med(uuid_copies)
    per, values = memory_per_insert()
    print(f"unit of work: 1 department + {N} employees, median of {REPEAT} runs, PostgreSQL with fsync on")
    print(f"{'what':44} {'seconds':>9} {'rows/s':>10}  ratio")
    copy_label = "psql \\copy (physical limit)"
    print(f"{copy_label:44} {copy:9.4f} {N / copy:10.0f}  1.00")
    print(f"{'recordsd SAVE':44} {save:9.4f} {N / save:10.0f}  {save / copy:.2f}x copy's time (target <= 1.3)")
    print(f"{'SQLAlchemy Session.commit (psycopg 3)':44} {orm:9.4f} {N / orm:10.0f}  {orm / save:.2f}x recordsd's time (target >= 3)")
    print(f"{'recordsd INSERT lines, pipelined (C client)':44} {edit:9.4f} {N / edit:10.0f}")
    print(f"{'recordsd lines + SAVE (the unit as sent)':44} {unit:9.4f} {N / unit:10.0f}  {unit / copy:.2f}x copy's time (target <= 1.5)")
    uuid_copy_label = "uuid keys: psql \\copy"
    print(f"{uuid_copy_label:44} {ucopy:9.4f} {N / ucopy:10.0f}  1.00")
    print(f"{'uuid keys: recordsd SAVE':44} {usave:9.4f} {N / usave:10.0f}  {usave / ucopy:.2f}x copy's time (target <= 2)")
    print(f"memory per pending insert: {per:.0f} bytes resident, of which values {values:.0f} bytes "
          f"-> {per - values:.0f} bytes overhead (target < 1024)")


if __name__ == "__main__":
    main()
