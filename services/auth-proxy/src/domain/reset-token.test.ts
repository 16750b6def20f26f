import { createResetTokenCodec } from "./reset-token";

const secret = "a-test-secret-that-is-long-enough-for-hkdf";
const codec = createResetTokenCodec(secret, 3600);
const t0 = new Date("2026-06-01T08:00:00.000Z");
const pwdAt = new Date("2026-01-01T00:00:00.000Z");

function flipAt(token: string, index: number): string {
  const c = token[index]!;
  return token.slice(0, index) + (c === "A" ? "B" : "A") + token.slice(index + 1);
}

describe("reset token codec", () => {
  it("when a token is read within the hour, then it yields the user and a unique id", async () => {
    const token = await codec.issue("user-1", pwdAt, t0);
    expect(token.split(".")).toHaveLength(5);
    expect(token).not.toContain("user-1");
    const claims = await codec.read(token, new Date(t0.getTime() + 59 * 60_000));
    expect(claims.identityUserId).toBe("user-1");
    expect(claims.expiresAt).toEqual(new Date(t0.getTime() + 3_600_000));
    expect(claims.passwordSetAt).toBe(pwdAt.getTime());
    const other = await codec.read(await codec.issue("user-1", pwdAt, t0), t0);
    expect(other.jti).not.toBe(claims.jti);
  });

  it("when the token is older than one hour, then RESET_TOKEN_EXPIRED", async () => {
    const token = await codec.issue("user-1", pwdAt, t0);
    await expect(codec.read(token, new Date(t0.getTime() + 3_600_001))).rejects.toMatchObject({
      code: "RESET_TOKEN_EXPIRED",
      status: 400,
    });
  });

  it("when any part of the token is altered, then RESET_TOKEN_INVALID", async () => {
    const token = await codec.issue("user-1", pwdAt, t0);
    const parts = token.split(".");
    let offset = 0;
    const positions: number[] = [];
    for (const part of parts) {
      if (part.length > 0) positions.push(offset + Math.floor(part.length / 2));
      offset += part.length + 1;
    }
    for (const position of positions) {
      await expect(codec.read(flipAt(token, position), t0)).rejects.toMatchObject({
        code: "RESET_TOKEN_INVALID",
      });
    }
    for (const garbage of ["", "abc", `${token}x`, token.split(".").slice(0, 4).join(".")]) {
      await expect(codec.read(garbage, t0)).rejects.toMatchObject({ code: "RESET_TOKEN_INVALID" });
    }
  });

  it("when the token was made with another secret, then RESET_TOKEN_INVALID", async () => {
    const foreign = createResetTokenCodec("another-secret-that-is-also-long-enough", 3600);
    await expect(codec.read(await foreign.issue("user-1", pwdAt, t0), t0)).rejects.toMatchObject({
      code: "RESET_TOKEN_INVALID",
    });
  });
});
