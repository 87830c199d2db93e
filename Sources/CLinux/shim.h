// Linux calls that Swift's Glibc module does not bring in.
// pidfd_open (glibc 2.36, Linux 5.3): a descriptor for a process that becomes readable when the process ends, so a
// standby relay can sleep until the relay holding its file ends, with nothing polled meanwhile.
#include <sys/pidfd.h>
