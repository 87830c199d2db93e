// sd-bus (libsystemd) for desktop notifications. sd_bus_message_append is variadic, which Swift cannot call,
// so the calls the relay needs are written here in C. They all go through one connection to the session bus
// (DBUS_SESSION_BUS_ADDRESS), the one whose popups the server answers with ActionInvoked: sd-bus is not
// thread-safe, so the caller holds a lock around every call on it.
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
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

/// Opens a connection to the session bus. Returns 0, or < 0 (err says why).
static inline int clsd_open(sd_bus **bus, char *err, size_t errlen) {
    int r = sd_bus_open_user(bus);
    if (r < 0) return clsd_fail(r, NULL, "cannot connect to the session bus", err, errlen);
    return 0;
}

/// 1 if the notification server renders body markup, 0 if not; < 0 on failure (err says why).
static inline int clsd_body_markup(sd_bus *bus, char *err, size_t errlen) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, CLSD_DEST, CLSD_PATH, CLSD_DEST, "GetCapabilities", &e, &reply, "");
    if (r < 0) {
        r = clsd_fail(r, &e, "GetCapabilities", err, errlen);
        sd_bus_error_free(&e);
        return r;
    }
    int markup = 0;
    const char *cap;
    r = sd_bus_message_enter_container(reply, 'a', "s");
    while (r >= 0 && (r = sd_bus_message_read(reply, "s", &cap)) > 0) {
        if (strcmp(cap, "body-markup") == 0) markup = 1;
    }
    sd_bus_message_unref(reply);
    return markup;
}

/// org.freedesktop.Notifications.Notify. `actions`: key, label, key, label ... (`count` strings); `image_path`: a
/// picture to show in the popup (the spec's `image-path` hint, a file path), or NULL. Returns 0 and the popup's id in
/// *id, or < 0 (err says why).
static inline int clsd_notify(sd_bus *bus, const char *app, uint32_t replaces, const char *icon, const char *summary,
                              const char *body, const char **actions, int count, uint8_t urgency, const char *category,
                              const char *desktop_entry, const char *image_path, int32_t timeout_ms, uint32_t *id,
                              char *err, size_t errlen) {
    sd_bus_message *m = NULL, *reply = NULL;
    sd_bus_error e = SD_BUS_ERROR_NULL;
    int r = sd_bus_message_new_method_call(bus, &m, CLSD_DEST, CLSD_PATH, CLSD_DEST, "Notify");
    if (r >= 0) r = sd_bus_message_append(m, "susss", app, replaces, icon, summary, body);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "s");
    for (int i = 0; r >= 0 && i < count; i++) r = sd_bus_message_append(m, "s", actions[i]);
    if (r >= 0) r = sd_bus_message_close_container(m);
    if (r >= 0) r = sd_bus_message_open_container(m, 'a', "{sv}");
    if (r >= 0) r = sd_bus_message_append(m, "{sv}", "urgency", "y", urgency);
    if (r >= 0 && category && *category) r = sd_bus_message_append(m, "{sv}", "category", "s", category);
    if (r >= 0 && desktop_entry && *desktop_entry) r = sd_bus_message_append(m, "{sv}", "desktop-entry", "s", desktop_entry);
    if (r >= 0 && image_path && *image_path) r = sd_bus_message_append(m, "{sv}", "image-path", "s", image_path);
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
    return r;
}

/// org.freedesktop.Notifications.CloseNotification: takes the popup `id` off the screen. Returns 0, or < 0
/// (err says why). An id the server no longer shows is not an error (the spec: it answers with an empty reply).
static inline int clsd_close(sd_bus *bus, uint32_t id, char *err, size_t errlen) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    int r = sd_bus_call_method(bus, CLSD_DEST, CLSD_PATH, CLSD_DEST, "CloseNotification", &e, NULL, "u", id);
    if (r < 0) r = clsd_fail(r, &e, "CloseNotification", err, errlen);
    else r = 0;
    sd_bus_error_free(&e);
    return r;
}

/// What a clicked popup told us: its id and the action's key ("default" for a click on the popup itself).
typedef void (*clsd_action_callback)(uint32_t id, const char *key, void *context);

typedef struct {
    clsd_action_callback callback;
    void *context;
} clsd_action_listener;

static inline int clsd_on_action_invoked(sd_bus_message *m, void *userdata, sd_bus_error *e) {
    (void)e;
    clsd_action_listener *l = (clsd_action_listener *)userdata;
    uint32_t id = 0;
    const char *key = NULL;
    if (sd_bus_message_read(m, "us", &id, &key) >= 0 && key) l->callback(id, key, l->context);
    return 0;
}

/// Listens for ActionInvoked from the notification server (its well-known name: the bus checks the sender, so
/// another client cannot fake a click). The listener must outlive the bus.
static inline int clsd_listen_actions(sd_bus *bus, clsd_action_listener *listener, char *err, size_t errlen) {
    int r = sd_bus_match_signal(bus, NULL, CLSD_DEST, CLSD_PATH, CLSD_DEST, "ActionInvoked", clsd_on_action_invoked, listener);
    if (r < 0) return clsd_fail(r, NULL, "cannot listen for ActionInvoked", err, errlen);
    return 0;
}

/// Handles what has arrived (signals, the end of the connection): > 0 while there may be more, 0 when there is
/// nothing left to do now, < 0 when the connection is gone.
static inline int clsd_process(sd_bus *bus) { return sd_bus_process(bus, NULL); }

static inline int clsd_fd(sd_bus *bus) { return sd_bus_get_fd(bus); }

/// What to wait for before the next `clsd_process`: the socket's poll events, and the deadline in ms from now
/// (-1: none; 0: messages a call read while it waited for its answer are queued, to be handled now). sd-bus's own
/// recipe for an outside event loop (sd_bus_get_events, sd_bus_get_timeout).
static inline int clsd_wait_spec(sd_bus *bus, short *events, int *timeout_ms) {
    int e = sd_bus_get_events(bus);
    if (e < 0) return e;
    uint64_t until = 0;
    int r = sd_bus_get_timeout(bus, &until);
    if (r < 0) return r;
    *events = (short)e;
    if (until == UINT64_MAX) {
        *timeout_ms = -1;
    } else {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        uint64_t now_us = (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
        uint64_t left_ms = until > now_us ? (until - now_us + 999) / 1000 : 0;
        *timeout_ms = left_ms > INT32_MAX ? INT32_MAX : (int)left_ms;
    }
    return 0;
}

static inline void clsd_free(sd_bus *bus) { sd_bus_flush_close_unref(bus); }
