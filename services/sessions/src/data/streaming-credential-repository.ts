import { eq } from "drizzle-orm";
import type { SessionsDb } from "./session-repository";
import { streamingCredentialsTable } from "./streaming-credential-tables";

export interface StoredStreamingCredential {
  username: string;
  sealedPassword: string;
}

export class StreamingCredentialRepository {
  constructor(private readonly db: SessionsDb) {}

  /** Stores the session's credential unless one exists; returns the one that is stored (a retried launch keeps the first). */
  async insertOnce(
    sessionId: string,
    credential: StoredStreamingCredential,
  ): Promise<StoredStreamingCredential> {
    await this.db
      .insert(streamingCredentialsTable)
      .values({ sessionId, ...credential })
      .onConflictDoNothing({ target: streamingCredentialsTable.sessionId });
    const stored = await this.find(sessionId);
    if (!stored) throw new Error(`streaming credential for session ${sessionId} was not stored`);
    return stored;
  }

  async find(sessionId: string): Promise<StoredStreamingCredential | undefined> {
    const [row] = await this.db
      .select({
        username: streamingCredentialsTable.username,
        sealedPassword: streamingCredentialsTable.sealedPassword,
      })
      .from(streamingCredentialsTable)
      .where(eq(streamingCredentialsTable.sessionId, sessionId));
    return row;
  }
}
