// The placement policies (which worker gets a new I/O queue), defined once for the worker pool, the config schema,
// the config types and the management API. A leaf module: target/config imports it without reaching the pool.

export const PLACEMENTS = ['single', 'controller', 'queue', 'host'] as const;
export type Placement = (typeof PLACEMENTS)[number];

/** The policies as error texts name them: "single, controller, queue, host". */
export const PLACEMENT_LIST = PLACEMENTS.join(', ');
/** The same in a sentence: "single, controller, queue or host". */
export const PLACEMENT_CHOICES = `${PLACEMENTS.slice(0, -1).join(', ')} or ${PLACEMENTS[PLACEMENTS.length - 1]}`;

export function isPlacement(s: string): s is Placement {
  return (PLACEMENTS as readonly string[]).includes(s);
}
