// Linux calls that Swift's Glibc module does not bring in.
// timerfd (Linux 2.6.25): a deadline any thread can move without waking the thread that waits for it, for the
// AlarmClock, whose thread then wakes only when an alarm is due, not at the time of one cancelled meanwhile.
#include <sys/timerfd.h>
// pidfd_open (glibc 2.36, Linux 5.3): a descriptor for a process that becomes readable when the process ends, so a
// standby relay can sleep until the relay holding its file ends, with nothing polled meanwhile.
#include <sys/pidfd.h>
// eventfd (Linux 2.6.27): a counter another thread makes readable with one write, and one read empties, for
// `PollWake`: a wake-up costs a system call on each side, where a pipe needs a read more to find it empty.
#include <sys/eventfd.h>
