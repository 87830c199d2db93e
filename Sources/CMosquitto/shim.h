#ifndef CMOSQUITTO_SHIM_H
#define CMOSQUITTO_SHIM_H
// libmosquitto (the Eclipse Mosquitto project's client library), from Debian's libmosquitto-dev.
#include <mosquitto.h>
#include <mqtt_protocol.h>
#endif
