import {
  ASSIGN_SIGNATURE_HEADER,
  ASSIGN_TIMESTAMP_HEADER,
  signAssignment,
  type Assignment,
} from "@cgs/host-agent";
import { pinnedHttpsRequest } from "./pinned-https";

export type { Assignment } from "@cgs/host-agent";

/** A claimed pool instance, as the assignment reaches it. */
export interface AssignTarget {
  instanceId: string;
  /** Its address on the platform's network (the streaming subnet), where its agent's endpoint listens. */
  privateIp: string;
  poolId: string;
  /** The endpoint's certificate the standby reports named (pinned). */
  certSha256: string;
}

/** The instance's agent has taken another session already: this claim must not use it. */
export class AlreadyAssignedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "AlreadyAssignedError";
  }
}

/**
 * Hands a claimed pool instance its session: the session's secrets (the same a cold launch writes in its user
 * data), signed with the pool slot's key. Fails while the instance's agent is not up yet (a warm instance still
 * booting); the reconciler tries again.
 */
export interface HostAssigner {
  assign(target: AssignTarget, assignment: Assignment): Promise<void>;
}

export interface HttpsHostAssignerSettings {
  port: number;
  timeoutMs: number;
  /** The pool slot's key (the credential vault derives it). */
  poolKey(poolId: string): Buffer;
  now?: () => number;
}

/** POST /v1/assign on the agent's endpoint, over TLS pinned to the certificate its standby reports named. */
export class HttpsHostAssigner implements HostAssigner {
  constructor(private readonly settings: HttpsHostAssignerSettings) {}

  async assign(target: AssignTarget, assignment: Assignment): Promise<void> {
    const body = JSON.stringify(assignment);
    const timestamp = (this.settings.now ?? Date.now)();
    const reply = await pinnedHttpsRequest({
      url: new URL(`https://${target.privateIp}:${this.settings.port}/v1/assign`),
      method: "POST",
      headers: {
        [ASSIGN_TIMESTAMP_HEADER]: String(timestamp),
        [ASSIGN_SIGNATURE_HEADER]: signAssignment(body, timestamp, this.settings.poolKey(target.poolId)),
      },
      body,
      pinned: target.certSha256,
      timeoutMs: this.settings.timeoutMs,
      describe: `pool instance ${target.instanceId}`,
    });
    if (reply.status === 202) return;
    if (reply.status === 409) {
      throw new AlreadyAssignedError(`pool instance ${target.instanceId} already serves another session`);
    }
    throw new Error(`pool instance ${target.instanceId} answered ${reply.status} to its assignment`);
  }
}
