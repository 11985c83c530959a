// The verbs of the `nvme-tcp` bin and their one-line descriptions, defined once: the top-level help lists these and
// each verb's own --help starts with its line. A module of its own so that main.ts can list the verbs without
// loading the initiator or the harness.

/** The initiator's verbs (cli/initiator.ts). */
export const INITIATOR_VERBS: Readonly<Record<string, string>> = {
  discover: 'read a discovery log page from a target',
  'connect-all': 'discover, then connect to every subsystem the log lists (--hold keeps them)',
  connect: 'connect to a subsystem and print what it exposes (--hold keeps it)',
  disconnect: 'disconnect connections held by "connect --hold" (-n NQN or --pid PID)',
  'disconnect-all': 'disconnect every connection held by "connect --hold"',
  'list-subsys': 'list the connections held by "connect --hold"',
  io: 'run reads/writes against a namespace ("io verify")',
  queues: 'show the I/O queues of held connections; move a queue to another io worker',
  'check-host': "check this machine's NIC/CPU layout for queue settings",
  'resv-register': 'register, unregister or replace a reservation key (Reservation Register)',
  'resv-acquire': 'acquire, preempt or preempt-and-abort a reservation (Reservation Acquire)',
  'resv-release': 'release or clear a reservation (Reservation Release)',
  'resv-report': 'print the reservation status: holder, registrants, keys (Reservation Report)',
};

/** Every verb, in the order the top-level help lists them. */
export const VERBS: Readonly<Record<string, string>> = {
  target: 'run an NVMe/TCP target (controller); "target ctl" manages a running one over HTTP',
  ...INITIATOR_VERBS,
  bench: 'run a harness scenario or workload and write a report',
};
