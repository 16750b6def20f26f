import { AppError, type Principal } from "@cgs/shared";
import type { AccountRow } from "../data/account-tables";
import type { AccountRepository } from "../data/account-repository";
import { DAY_MS, type Clock } from "@cgs/shared";
import { effectivePreferences, parsePreferencesPatch, type Preferences } from "./preferences";

export interface DeletionSchedule {
  requestedAt: string;
  purgeAt: string;
}

export interface AccountDeletion extends DeletionSchedule {
  status: "pending_deletion";
}

export type AuthMethod = "bearer" | "cookie";

export interface IdentityView {
  identityUserId: string;
  email: string | null;
  expiresAt: string;
  authMethod: AuthMethod;
  deletion: DeletionSchedule | null;
}

/** What sessions and billing read through GET /internal/v1/accounts/me. */
export interface InternalAccountView {
  identityUserId: string;
  pendingDeletion: boolean;
  purgeAt: string | null;
  preferences: Preferences;
}

export interface AccountUseCasesDeps {
  accounts: AccountRepository;
  clock: Clock;
  deletionGraceDays: number;
}

function scheduleOf(account: AccountRow): DeletionSchedule | null {
  if (!account.deletionRequestedAt || !account.purgeAt) return null;
  return { requestedAt: account.deletionRequestedAt.toISOString(), purgeAt: account.purgeAt.toISOString() };
}

export function createAccountUseCases({ accounts, clock, deletionGraceDays }: AccountUseCasesDeps) {
  /** The caller's account, created on their first authenticated request; a purged account stays gone. */
  async function ensureAccount(principal: Principal): Promise<AccountRow> {
    const email = principal.email ?? null;
    let account = await accounts.find(principal.identityUserId);
    if (!account) {
      await accounts.createIfAbsent(principal.identityUserId, email, clock.now());
      account = await accounts.find(principal.identityUserId);
      // Only a tombstone stops the insert: the identity was purged and its token must not revive it.
      if (!account) throw AppError.unauthenticated();
    } else if (email && account.email !== email) {
      await accounts.updateEmail(account.identityUserId, email, clock.now());
      account = { ...account, email };
    }
    return account;
  }

  return {
    ensureAccount,

    async readSettings(principal: Principal): Promise<Preferences> {
      return effectivePreferences((await ensureAccount(principal)).preferences);
    },

    async updateSettings(principal: Principal, body: unknown): Promise<Preferences> {
      const patch = parsePreferencesPatch(body);
      const account = await ensureAccount(principal);
      if (Object.keys(patch).length === 0) return effectivePreferences(account.preferences);
      const updated = await accounts.mergePreferences(account.identityUserId, patch, clock.now());
      if (!updated) throw AppError.unauthenticated();
      return effectivePreferences(updated.preferences);
    },

    async describeIdentity(principal: Principal, authMethod: AuthMethod): Promise<IdentityView> {
      const account = await ensureAccount(principal);
      return {
        identityUserId: account.identityUserId,
        email: principal.email ?? account.email ?? null,
        expiresAt: principal.expiresAt.toISOString(),
        authMethod,
        deletion: scheduleOf(account),
      };
    },

    /** Idempotent: the first request fixes requestedAt and purgeAt (requestedAt + grace). */
    async requestDeletion(principal: Principal): Promise<AccountDeletion> {
      const account = await ensureAccount(principal);
      const existing = scheduleOf(account);
      if (existing) return { status: "pending_deletion", ...existing };
      const requestedAt = clock.now();
      const purgeAt = new Date(requestedAt.getTime() + deletionGraceDays * DAY_MS);
      const scheduled = await accounts.scheduleDeletion(account.identityUserId, requestedAt, purgeAt);
      const schedule = scheduled && scheduleOf(scheduled);
      if (!schedule) throw AppError.unauthenticated();
      return { status: "pending_deletion", ...schedule };
    },

    async internalView(principal: Principal): Promise<InternalAccountView> {
      const account = await ensureAccount(principal);
      return {
        identityUserId: account.identityUserId,
        pendingDeletion: account.purgeAt !== null,
        purgeAt: account.purgeAt?.toISOString() ?? null,
        preferences: effectivePreferences(account.preferences),
      };
    },
  };
}

export type AccountUseCases = ReturnType<typeof createAccountUseCases>;
