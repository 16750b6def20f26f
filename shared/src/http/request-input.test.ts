import { z } from "zod";
import { parseBody, readIdempotencyKey } from "./request-input";

const schema = z.object({ amount: z.number().int().min(1) }).strict();
const header = (value: string | undefined) => ({ get: () => value }) as never;

describe("request input shared by the services", () => {
  it("when the body is valid, then its parsed value comes back", () => {
    expect(parseBody(schema, { amount: 5 })).toEqual({ amount: 5 });
  });

  it("when the body has an unknown field, then VALIDATION_ERROR names it", () => {
    expect(() => parseBody(schema, { amount: 5, coupon: "x" })).toThrow(
      expect.objectContaining({ code: "VALIDATION_ERROR", message: "Unknown field: coupon" }),
    );
  });

  it("when a field is wrong or the body is missing, then VALIDATION_ERROR names the field", () => {
    expect(() => parseBody(schema, { amount: 0 })).toThrow(
      expect.objectContaining({ code: "VALIDATION_ERROR", message: expect.stringMatching(/^amount /) }),
    );
    expect(() => parseBody(schema, undefined)).toThrow(
      expect.objectContaining({ message: expect.stringMatching(/^amount /) }),
    );
  });

  it("when the Idempotency-Key is absent, then none; when it is too long, then VALIDATION_ERROR names it", () => {
    expect(readIdempotencyKey(header(undefined))).toBeUndefined();
    expect(readIdempotencyKey(header("k-1"))).toBe("k-1");
    expect(() => readIdempotencyKey(header("x".repeat(256)))).toThrow(
      expect.objectContaining({
        code: "VALIDATION_ERROR",
        message: expect.stringContaining("Idempotency-Key"),
      }),
    );
  });
});
