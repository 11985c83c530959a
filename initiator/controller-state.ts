// The controller state names, in a types-only module so that dispatch/ (which sits above the controller) can read a
// controller's state without importing the Controller. The transition table and setState live in controller.ts.

/**
 * Controller states (Linux nvme_ctrl_state): new → connecting → live; live → resetting (error recovery) →
 * connecting (reconnect attempts) → live; any → deleting → deleted; connecting → dead when ctrl_loss_tmo expires.
 */
export type ControllerState = 'new' | 'connecting' | 'live' | 'resetting' | 'deleting' | 'deleted' | 'dead';
