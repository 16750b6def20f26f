import { AppError } from "@cgs/shared";
import {
  CODECS,
  FRAME_RATES,
  RESOLUTIONS,
  type Preferences,
  type StoredPreferences,
} from "../data/stored-preferences";

export type { Preferences, StoredPreferences };

const REGION_PATTERN = /^[a-z]{2}(-[a-z]+)+-[0-9]{1,2}$/;

export const DEFAULT_PREFERENCES: Readonly<Preferences> = Object.freeze({
  resolution: "1920x1080",
  fps: 60,
  bitrateKbps: 20_000,
  codec: "h264",
  region: "auto",
  idleTimeoutMinutes: 15,
  maxSessionLengthMinutes: 720,
});

type FieldCheck = (value: unknown) => string | null;

const oneOf =
  (allowed: readonly (string | number)[]): FieldCheck =>
  (value) =>
    allowed.includes(value as string | number) ? null : `must be one of ${allowed.join(", ")}`;

const integerBetween =
  (min: number, max: number): FieldCheck =>
  (value) =>
    Number.isInteger(value) && (value as number) >= min && (value as number) <= max
      ? null
      : `must be an integer between ${min} and ${max}`;

const checks: Record<keyof Preferences, FieldCheck> = {
  resolution: oneOf(RESOLUTIONS),
  fps: oneOf(FRAME_RATES),
  bitrateKbps: integerBetween(2_000, 100_000),
  codec: oneOf(CODECS),
  region: (value) =>
    value === "auto" ||
    (typeof value === "string" && value.length >= 9 && value.length <= 32 && REGION_PATTERN.test(value))
      ? null
      : "must be auto or a cloud region such as us-east-1",
  idleTimeoutMinutes: integerBetween(5, 240),
  maxSessionLengthMinutes: integerBetween(30, 1440),
};

const isPreferenceField = (name: string): name is keyof Preferences =>
  Object.prototype.hasOwnProperty.call(checks, name);

/**
 * Validates a JSON merge patch (RFC 7396) of Preferences. No field is nullable, so null is rejected rather
 * than unsetting; unknown fields are rejected. Throws VALIDATION_ERROR naming the first bad field.
 */
export function parsePreferencesPatch(body: unknown): StoredPreferences {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw AppError.validation("body", "body must be a JSON object");
  }
  const patch: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(body)) {
    if (!isPreferenceField(name)) throw AppError.validation(name, `Unknown field: ${name}`);
    if (value === null) throw AppError.validation(name, `${name} must not be null`);
    const problem = checks[name](value);
    if (problem) throw AppError.validation(name, `${name} ${problem}`);
    patch[name] = value;
  }
  return patch as StoredPreferences;
}

/**
 * Stored fields over the defaults, in the documented field order; ignores anything no longer valid or no longer
 * a preference (lowBalanceEmail, removed: no low-balance e-mail is ever sent, spec §6).
 */
export function effectivePreferences(stored: StoredPreferences | null | undefined): Preferences {
  const result: Record<string, unknown> = { ...DEFAULT_PREFERENCES };
  for (const [name, value] of Object.entries(stored ?? {})) {
    if (isPreferenceField(name) && value !== null && checks[name](value) === null) result[name] = value;
  }
  return result as unknown as Preferences;
}
