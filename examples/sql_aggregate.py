"""A SQL statement over two inputs: revenue and order count per country.

    clusterdeck submit examples/sql_aggregate.py

The statement sees the orders as the view ``orders`` and the users as ``users``; it runs
in one subtask (the default for sql), which reads all of both.
"""

from pathlib import Path

DATA = Path(__file__).parent / "data"

QUERY = """
SELECT u.country,
       COUNT(*)                 AS orders,
       ROUND(SUM(o.amount), 2)  AS revenue
FROM orders o JOIN users u ON o.user_id = u.user_id
GROUP BY u.country
ORDER BY revenue DESC
"""


def build(env):
    env.set_job_name("sql_aggregate")
    env.set_parallelism(2)
    orders = env.read_csv(DATA / "orders.csv",
                          schema="order_id INT, user_id INT, amount DOUBLE", name="orders")
    users = env.read_csv(DATA / "users.csv", schema="user_id INT, name STRING, country STRING",
                         name="users")
    (orders.sql(QUERY, table="orders", tables={"users": users}, name="revenue per country")
           .collect(name="revenue"))
