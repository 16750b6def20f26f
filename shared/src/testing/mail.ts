/** Reads the SMTP catcher's Mailpit-compatible API (test/peers: MAILPIT_API_URL, default 127.0.0.1:8025). */
export const mailApiUrl = (): string => process.env.MAILPIT_API_URL || "http://127.0.0.1:8025";

export interface CaughtMessageSummary {
  ID: string;
  Subject: string;
  To: Array<{ Name: string; Address: string }>;
}

export interface CaughtMessage extends CaughtMessageSummary {
  Text: string;
  HTML: string;
}

export async function mailCatcherAvailable(): Promise<boolean> {
  try {
    return (await fetch(`${mailApiUrl()}/api/v1/info`, { signal: AbortSignal.timeout(2_000) })).ok;
  } catch {
    return false;
  }
}

/** Every caught message addressed to `address`, newest first. */
export async function messagesTo(address: string): Promise<CaughtMessageSummary[]> {
  const query = new URLSearchParams({ query: `to:"${address}"` });
  const res = await fetch(`${mailApiUrl()}/api/v1/search?${query}`);
  if (!res.ok) throw new Error(`mail search: HTTP ${res.status}`);
  const body = (await res.json()) as { messages: CaughtMessageSummary[] };
  return body.messages.filter((m) => m.To.some((t) => t.Address.toLowerCase() === address.toLowerCase()));
}

export async function readMessage(id: string): Promise<CaughtMessage> {
  const res = await fetch(`${mailApiUrl()}/api/v1/message/${encodeURIComponent(id)}`);
  if (!res.ok) throw new Error(`mail read: HTTP ${res.status}`);
  return (await res.json()) as CaughtMessage;
}

/** Waits until `count` messages to `address` arrived (default 1) and returns the newest, read in full. */
export async function waitForMail(
  address: string,
  options: { timeoutMs?: number; count?: number } = {},
): Promise<CaughtMessage> {
  const deadline = Date.now() + (options.timeoutMs ?? 10_000);
  const count = options.count ?? 1;
  for (;;) {
    const found = await messagesTo(address);
    if (found.length >= count) return readMessage(found[0]!.ID);
    if (Date.now() > deadline) throw new Error(`no e-mail to ${address} within the timeout`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
