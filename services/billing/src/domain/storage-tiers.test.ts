import { billingPeriodAt, parseStorageTiers } from "./storage-tiers";

describe("storage tiers and billing periods", () => {
  it("when the tiers are listed in any order, then each is parsed with its size and price", () => {
    const tiers = parseStorageTiers("premium:1000:1500, none:0:0,standard:250:500,basic:50:200");
    expect(tiers.standard).toEqual({ tier: "standard", sizeGb: 250, pricePerPeriod: 500 });
    expect(() => parseStorageTiers("none:0:0,basic:50,standard:250:500,premium:1000:1500")).toThrow(
      /tier:sizeGb:pricePerPeriod/,
    );
    expect(() => parseStorageTiers("none:0:0,basic:50:200,basic:50:200,standard:1:1,premium:1:1")).toThrow(
      /twice/,
    );
  });

  it.each([
    ["2026-11-20T10:00:00Z", "2026-11-01T00:00:00.000Z", "2026-12-01T00:00:00.000Z", "2026-11"],
    ["2026-12-31T23:59:59.999Z", "2026-12-01T00:00:00.000Z", "2027-01-01T00:00:00.000Z", "2026-12"],
    ["2028-02-29T12:00:00Z", "2028-02-01T00:00:00.000Z", "2028-03-01T00:00:00.000Z", "2028-02"],
    ["2027-01-01T00:00:00Z", "2027-01-01T00:00:00.000Z", "2027-02-01T00:00:00.000Z", "2027-01"],
  ])("when the time is %s, then the period is the UTC calendar month [%s, %s)", (at, start, end, key) => {
    const period = billingPeriodAt(new Date(at));
    expect(period.start.toISOString()).toBe(start);
    expect(period.end.toISOString()).toBe(end);
    expect(period.key).toBe(key);
  });
});
