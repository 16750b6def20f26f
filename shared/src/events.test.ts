import { createEvent, eventTypes, parseEvent } from "./events";

const started = {
  sessionId: "s-1",
  instanceId: "i-0abc",
  ratePerMinute: 5,
  currency: "EUR",
  startedAt: "2026-11-23T06:00:00.000Z",
};

describe("event contracts", () => {
  it("when an event is created, then it carries a uuid id, the time and the validated data", () => {
    const event = createEvent("session.started", "acc-1", started, {
      occurredAt: new Date("2026-11-23T06:00:01Z"),
    });
    expect(event).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      type: "session.started",
      occurredAt: "2026-11-23T06:00:01.000Z",
      accountId: "acc-1",
      data: started,
    });
    expect(parseEvent(JSON.parse(JSON.stringify(event)))).toEqual({ success: true, event });
  });

  it("when the data does not match the type's schema, then createEvent throws", () => {
    expect(() =>
      createEvent("credits.exhausted", "acc-1", { sessionId: "s-1", balance: 1.5, currency: "EUR" }),
    ).toThrow();
    expect(() =>
      createEvent("account.purge", "acc-1", { identityUserId: "u", requestedAt: "yesterday" }),
    ).toThrow();
  });

  it("when an envelope is malformed, has an unknown type or bad data, then parseEvent says why", () => {
    const valid = createEvent("credits.exhausted", "acc-1", {
      sessionId: "s-1",
      balance: 0,
      currency: "USD",
    });
    expect(parseEvent("nope")).toMatchObject({ success: false, error: expect.stringContaining("envelope") });
    expect(parseEvent({ ...valid, id: "not-a-uuid" })).toMatchObject({
      success: false,
      error: expect.stringContaining("id"),
    });
    expect(parseEvent({ ...valid, type: "session.exploded" })).toEqual({
      success: false,
      error: 'unknown event type "session.exploded"',
    });
    expect(parseEvent({ ...valid, data: { sessionId: "s-1", balance: "0", currency: "USD" } })).toMatchObject(
      {
        success: false,
        error: expect.stringContaining("balance"),
      },
    );
  });

  it("when listing the registry, then every documented event type is present", () => {
    expect([...eventTypes].sort()).toEqual(
      [
        "account.purge",
        "credits.exhausted",
        "credits.low",
        "metering.audit",
        "session.failed",
        "session.started",
        "session.stopped",
      ].sort(),
    );
  });
});
