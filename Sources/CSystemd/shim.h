// sd-bus (libsystemd) for desktop notifications. sd_bus_message_append is variadic, which Swift cannot call,
// so the two calls the relay needs are written here in C. Each opens its own connection to the session bus
// (DBUS_SESSION_BUS_ADDRESS): cheap on a local socket, and nothing is shared between threads.
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-daemon.h>

#define CLSD_DEST "org.freedesktop.Notifications"
#define CLSD_PATH "/org/freedesktop/Notifications"

// Writes "name: message" of a failed call into err. Returns r.
static inline int clsd_fail(int r, const sd_bus_error *e, const char *what, char *err, size_t errlen) {
    if (e && sd_bus_error_is_set(e)) {
        snprintf(err, errlen, "%s: %s: %s", what, e->name, e->message ? e->message : "");
    } else {
        snprintf(err, errlen, "%s: %s", what, strerror(r < 0 ? -r : r));
    }
    return r < 0 ? r : -1;
}

/// 1 if the notification server renders body markup, 0 if not; < 0 on failure (err says why).
static inline int clsd_body_markup(char *err, size_t errlen) {
    sd_bus *bus = NULL;
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    int r = sd_bus_open_user(&bus);
    if (r < 0) return clsd_fail(r, NULL, "cannot connect to the session bus", err, errlen);
    r = sd_bus_call_method(bus, CLSD_DEST, CLSD_PATH, CLSD_DEST, "GetCapabilities", &e, &reply, "");
    if (r < 0) {
        r = clsd_fail(r, &e, "GetCapabilities", err, errlen);
        sd_bus_error_free(&e);
        sd_bus_unref(bus);
        return r;
    }
    int markup = 0;
    const char *cap;
    r = sd_bus_message_enter_container(reply, 'a', "s");
    while (r >= 0 && (r = sd_bus_message_read(reply, "s", &cap)) > 0) {
        if (strcmp(cap, "body-markup") == 0) markup = 1;
    }
    sd_bus_message_unref(reply);
    sd_bus_unref(bus);
    return markup;
}

/// org.freedesktop.Notifications.Notify. Returns 0 and the popup's id in *id, or < 0 (err says why).
static inline int clsd_notify(const char *app, uint32_t replaces, const char *icon, const char *summary, const char *body,
                              uint8_t urgency, const char *category, const char *desktop_entry, int32_t timeout_ms,
                              uint32_t *id, char *err, size_t errlen) {
    sd_bus *bus = NULL;
    sd_bus_message *m = NULL, *reply = NULL;
    sd_bus_error e = SD_BUS_ERROR_NULL;
    int r = sd_bus_open_user(&bus);
    if (r < 0) return clsd_fail(r, NULL, "cannot connect to the session bus", err, errlen);
    r = sd_bus_message_new_method_call(bus, &m, CLSD_DEST, CLSD_PATH, CLSD_DEST, "Notify");
    if (r >= 0) r = sd_bus_message_append(m, "susssas", app, replaces, icon, summary, body, 0);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "{sv}");
    if (r >= 0) r = sd_bus_message_append(m, "{sv}", "urgency", "y", urgency);
    if (r >= 0 && category && *category) r = sd_bus_message_append(m, "{sv}", "category", "s", category);
    if (r >= 0 && desktop_entry && *desktop_entry) r = sd_bus_message_append(m, "{sv}", "desktop-entry", "s", desktop_entry);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_append(m, "i", timeout_ms);
    if (r < 0) {
        r = clsd_fail(r, NULL, "cannot build the Notify call", err, errlen);
    } else {
        r = sd_bus_call(bus, m, 10 * 1000 * 1000, &e, &reply);
        if (r < 0) {
            r = clsd_fail(r, &e, "Notify", err, errlen);
        } else {
            r = sd_bus_message_read(reply, "u", id);
            if (r < 0) r = clsd_fail(r, NULL, "cannot read the Notify answer", err, errlen);
            else r = 0;
        }
    }
    sd_bus_error_free(&e);
    sd_bus_message_unref(reply);
    sd_bus_message_unref(m);
    sd_bus_unref(bus);
    return r;
}

/// org.freedesktop.Notifications.CloseNotification: takes the popup `id` off the screen. Returns 0, or < 0
/// (err says why). An id the server no longer shows is not an error (the spec: it answers with an empty reply).
static inline int clsd_close(uint32_t id, char *err, size_t errlen) {
    sd_bus *bus = NULL;
    sd_bus_error e = SD_BUS_ERROR_NULL;
    int r = sd_bus_open_user(&bus);
    if (r < 0) return clsd_fail(r, NULL, "cannot connect to the session bus", err, errlen);
    r = sd_bus_call_method(bus, CLSD_DEST, CLSD_PATH, CLSD_DEST, "CloseNotification", &e, NULL, "u", id);
    if (r < 0) r = clsd_fail(r, &e, "CloseNotification", err, errlen);
    else r = 0;
    sd_bus_error_free(&e);
    sd_bus_unref(bus);
    return r;
}
