"""Join two CSV files by key: every order with the name and country of its user.

    clusterdeck submit examples/join_csv.py [OUTPUT_FOLDER]

Both inputs are hashed by user_id, so each join subtask sees every order and every user
of the same ids. Orders of unknown users are dropped (an inner join). The joined rows
come back to the client and, with OUTPUT_FOLDER, are written there as Parquet.
"""

from pathlib import Path

DATA = Path(__file__).parent / "data"


def build(env):
    env.set_job_name("join_csv")
    env.set_parallelism(2)
    orders = env.read_csv(DATA / "orders.csv",
                          schema="order_id INT, user_id INT, amount DOUBLE", name="orders")
    users = env.read_csv(DATA / "users.csv", schema="user_id INT, name STRING, country STRING",
                         name="users")
    joined = orders.join(users, on="user_id", name="orders with users")
    joined.collect(name="joined")
    if env.args:
        joined.write_parquet(env.args[0], name="write joined")
