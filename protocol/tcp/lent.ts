// How long a payload handed over for sending stays as it is: the one lifetime type of the send path, from a backend's
// read (target/backend ReadLent is this type) through a completion's data to the send batch (connection/PduBatch).

/**
 * STABLE: as long as the holder keeps it (a view of it may be sent). TASK: until the current event-loop task ends
 * (the target workers' read cache: only a message from another worker can change its bytes), so it may be copied when
 * this task's batch is written. CALL: only until the call that hands it over returns (one buffer reused for every
 * read), so it is copied at once.
 */
export const Lent = { STABLE: 0, TASK: 1, CALL: 2 } as const;
export type Lent = (typeof Lent)[keyof typeof Lent];
