"""An MQTT subscriber from PyPI (paho-mqtt), the witness of what the relay published to a real broker.

    mqtt_subscriber.py follow HOST PORT OUT [USER PASSWORD]   a lasting session (clean_session off, QoS 1): every message on `#` is
                                              appended to OUT as one JSON line; reconnects by itself. Prints
                                              "listening subscribed" once the broker confirmed the subscription.
    mqtt_subscriber.py retained HOST PORT [USER PASSWORD]     prints the retained messages as one JSON object {topic: payload}.
    mqtt_subscriber.py publish HOST PORT TOPIC PAYLOAD retain|once   publishes one message (QoS 1) as Home Assistant
                                              would (its birth message, or clearing a retained one), then prints "published".
"""
import json
import sys
import threading
import time

import paho.mqtt.client as mqtt


def follow(host, port, out):
    lines = open(out, "a", buffering=1)
    announced = threading.Event()

    def on_connect(client, userdata, flags, reason, properties):
        client.subscribe("#", qos=1)

    def on_subscribe(client, userdata, mid, reasons, properties):
        if not announced.is_set():
            announced.set()
            print("listening subscribed", flush=True)

    def on_message(client, userdata, m):
        lines.write(json.dumps({"topic": m.topic, "payload": m.payload.decode("utf-8", "replace"), "retain": m.retain}) + "\n")

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="witness-follow", clean_session=False,
                         protocol=mqtt.MQTTv311)
    client.on_connect, client.on_subscribe, client.on_message = on_connect, on_subscribe, on_message
    if USER:
        client.username_pw_set(*USER)
    client.reconnect_delay_set(min_delay=1, max_delay=1)
    client.connect(host, port, keepalive=10)
    client.loop_forever(retry_first_connection=True)


def retained(host, port):
    seen = {}

    def on_connect(client, userdata, flags, reason, properties):
        client.subscribe("#", qos=1)

    def on_message(client, userdata, m):
        if m.retain:
            seen[m.topic] = m.payload.decode("utf-8", "replace")

    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="witness-retained-%d" % time.time_ns(),
                         protocol=mqtt.MQTTv5)
    client.on_connect, client.on_message = on_connect, on_message
    if USER:
        client.username_pw_set(*USER)
    client.connect(host, port, keepalive=10)
    client.loop_start()
    time.sleep(1.0)  # retained messages come right after the subscription
    client.loop_stop()
    print(json.dumps(seen))


def publish(host, port, topic, payload, retain):
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="witness-publish-%d" % time.time_ns(),
                         protocol=mqtt.MQTTv5)
    if USER:
        client.username_pw_set(*USER)
    client.connect(host, port, keepalive=10)
    client.loop_start()
    client.publish(topic, payload.encode("utf-8"), qos=1, retain=retain).wait_for_publish(timeout=10)
    client.loop_stop()
    client.disconnect()
    print("published")


USER = None

if __name__ == "__main__":
    mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rest = sys.argv[5:] if mode == "follow" else sys.argv[7:] if mode == "publish" else sys.argv[4:]
    if len(rest) == 2:
        USER = (rest[0], rest[1])
    if mode == "follow":
        follow(host, port, sys.argv[4])
    elif mode == "publish":
        publish(host, port, sys.argv[4], sys.argv[5], sys.argv[6] == "retain")
    else:
        retained(host, port)
