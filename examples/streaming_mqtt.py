"""A streaming job reading an MQTT topic (docs/streaming.md, "The MQTT source and sink"):
each message's text, blank ones dropped, upper-cased, into text files that become visible
with each completed checkpoint, or published to another topic. At least once: a message
is acknowledged to the broker only once a completed checkpoint covers it.

    clusterdeck submit examples/streaming_mqtt.py -- IN OUT [PARALLELISM]

IN: the topic (a filter, ``+``/``#`` allowed) on the cluster's broker, under its ``data/``
topics: ``sensors/+`` reads ``clusterdeck/<cluster>/data/sensors/+``. OUT: an output
folder, ``mqtt:<topic>`` to publish each line to ``data/<topic>`` instead, or ``-`` to
print. PARALLELISM (default 2): subtasks sharing the subscription (Mosquitto; the embedded
amqtt broker has no shared subscriptions: give 1). The job runs until cancelled. Feed it
with any MQTT client holding the cluster's ``client`` login, for example:

    clusterdeck submit examples/streaming_mqtt.py -- sensors/+ mqtt:upper 2
    mosquitto_pub -h 127.0.0.1 -p PORT -u USER -P PASSWORD -q 1 \\
        -t clusterdeck/CLUSTER/data/sensors/a -m hello
"""


def build(env):
    topic = env.args[0] if env.args else "streaming-in"
    out = env.args[1] if len(env.args) > 1 else "streaming-out"
    parallelism = int(env.args[2]) if len(env.args) > 2 else 2
    env.set_job_name("mqtt to files").set_parallelism(parallelism)
    env.enable_checkpointing(0.5)
    lines = (env.mqtt_source(topic, qos=1)
             .filter(lambda text: text.strip())
             .map(lambda text: text.strip().upper()))
    if out == "-":
        lines.print()
    elif out.startswith("mqtt:"):
        lines.write_mqtt(out.removeprefix("mqtt:"), qos=1)
    else:
        lines.write_text(out)
