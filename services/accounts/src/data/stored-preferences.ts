/** The preferences as stored in the accounts table: the openapi.json Preferences shape, every field optional. */
export const RESOLUTIONS = ["1280x720", "1920x1080", "2560x1440", "3840x2160"] as const;
export const FRAME_RATES = [30, 60, 120] as const;
export const CODECS = ["h264", "h265", "av1"] as const;

/** The Preferences schema of openapi.json; every field has a default. */
export interface Preferences {
  resolution: (typeof RESOLUTIONS)[number];
  fps: (typeof FRAME_RATES)[number];
  bitrateKbps: number;
  codec: (typeof CODECS)[number];
  region: string;
  idleTimeoutMinutes: number;
  maxSessionLengthMinutes: number;
}

export type StoredPreferences = Partial<Preferences>;
