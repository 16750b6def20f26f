import * as aws from "@pulumi/aws";
import * as pulumi from "@pulumi/pulumi";
import { HOST_NAME, matching } from "../config-checks";

export interface PublicEndpointArgs {
  domain: string;
  route53ZoneId: string;
  tags: Record<string, string>;
}

/** The ACM certificate for the public host name, validated through its Route 53 zone. */
export class PublicEndpoint extends pulumi.ComponentResource {
  readonly certificateArn: pulumi.Output<string>;

  constructor(name: string, args: PublicEndpointArgs, opts?: pulumi.ComponentResourceOptions) {
    super("cgs:infra:PublicEndpoint", name, {}, opts);
    matching("cgs:domain", args.domain, HOST_NAME, "a lowercase host name such as play.example.com");
    matching(
      "cgs:route53ZoneId",
      args.route53ZoneId,
      /^Z[A-Z0-9]{1,32}$/,
      "a Route 53 hosted zone id (Z...)",
    );
    const cert = new aws.acm.Certificate(
      name,
      { domainName: args.domain, validationMethod: "DNS", tags: args.tags },
      { parent: this },
    );
    const option = cert.domainValidationOptions.apply((o) => {
      const first = o[0];
      if (!first) throw new Error(`no DNS validation option for ${args.domain}`);
      return first;
    });
    const record = new aws.route53.Record(
      `${name}-validation`,
      {
        zoneId: args.route53ZoneId,
        name: option.resourceRecordName,
        type: option.resourceRecordType,
        records: [option.resourceRecordValue],
        ttl: 300,
        allowOverwrite: true,
      },
      { parent: this },
    );
    const validation = new aws.acm.CertificateValidation(
      name,
      { certificateArn: cert.arn, validationRecordFqdns: [record.fqdn] },
      { parent: this },
    );
    this.certificateArn = validation.certificateArn;
    this.registerOutputs({ certificateArn: this.certificateArn });
  }
}
