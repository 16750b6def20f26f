import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { servicePrincipalTrustPolicy } from "../iam-policy";

/**
 * The beacon's whole program: an empty 204 at once, readable cross-origin (players' browsers measure it from the
 * portal's origin), with its timing exposed and never cached, as the sessions simulator's beacons answer locally.
 */
export const BEACON_HANDLER = `exports.handler = async () => ({
  statusCode: 204,
  headers: {
    "Access-Control-Allow-Origin": "*",
    "Timing-Allow-Origin": "*",
    "Cache-Control": "no-store",
  },
});
`;

export interface LatencyBeaconsArgs {
  /** cgs-<environment>. */
  namePrefix: string;
  /** Every fleet region, with its AWS provider (undefined: the home region's default provider). */
  regions: { id: string; provider?: aws.Provider }[];
  tags: Record<string, string>;
}

/**
 * One latency beacon per fleet region: a Lambda function URL in that region, public (auth NONE), answering GET with
 * an empty 204. Clients time a few GETs to each (the first one a warm-up) and start where the round trip is least.
 * A Lambda function URL rather than a public S3 object: it answers exactly as the simulator's beacon does (204,
 * Timing-Allow-Origin, no-store; S3 can send neither of the first two), and the stack keeps no public bucket, which
 * many accounts' S3 Block Public Access would refuse anyway. The function needs no permissions: its role has no
 * policy at all.
 */
export class LatencyBeacons extends pulumi.ComponentResource {
  /** The beacon URL of each region, by region id (https://<id>.lambda-url.<region>.on.aws/). */
  readonly urls: Record<string, pulumi.Output<string>>;

  constructor(name: string, args: LatencyBeaconsArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:LatencyBeacons", name, {}, opts);
    const role = new aws.iam.Role(
      name,
      {
        name: `${args.namePrefix}-latency-beacon`,
        description: "Latency beacons: answer an empty 204; may do nothing else",
        assumeRolePolicy: servicePrincipalTrustPolicy("lambda.amazonaws.com"),
        tags: args.tags,
      },
      { parent: this },
    );
    const code = new pulumi.asset.AssetArchive({ "index.js": new pulumi.asset.StringAsset(BEACON_HANDLER) });
    this.urls = Object.fromEntries(
      args.regions.map(({ id, provider }) => {
        const child = { parent: this, ...(provider ? { provider } : {}) };
        const fn = new aws.lambda.Function(
          `${name}-${id}`,
          {
            name: `${args.namePrefix}-latency-beacon`,
            description:
              "Answers GET with an empty 204 so players can measure their round trip to this region",
            runtime: aws.lambda.Runtime.NodeJS22dX,
            architectures: ["arm64"],
            handler: "index.handler",
            code,
            role: role.arn,
            memorySize: 128,
            timeout: 3,
            tags: args.tags,
          },
          child,
        );
        const url = new aws.lambda.FunctionUrl(
          `${name}-${id}`,
          { functionName: fn.name, authorizationType: "NONE" },
          child,
        );
        // Public by design: the URL answers anyone, and its answer is the same empty 204 for everyone.
        new aws.lambda.Permission(
          `${name}-${id}-url`,
          {
            function: fn.name,
            action: "lambda:InvokeFunctionUrl",
            principal: "*",
            functionUrlAuthType: "NONE",
          },
          child,
        );
        new aws.lambda.Permission(
          `${name}-${id}-invoke`,
          { function: fn.name, action: "lambda:InvokeFunction", principal: "*", invokedViaFunctionUrl: true },
          child,
        );
        return [id, url.functionUrl];
      }),
    );
    this.registerOutputs({ urls: this.urls });
  }
}
