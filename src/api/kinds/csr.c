/* CertificateSigningRequest (certificates.k8s.io/v1): how a node joining with a bootstrap token
 * asks for its client certificate. Cluster-scoped; the spec is fixed at creation (its requester
 * fields are filled in from the request's user by the SpecRequester admission
 * plugin, as upstream's strategy does, not by the client); /approval carries the Approved or Denied condition (`kubectl
 * certificate approve|deny`), /status the signer's certificate. The request's PEM shape is
 * checked here; its signature and subject are the approver's and signer's to check (the api
 * module has no cryptography), as Kubernetes' signers check CheckSignature. */
#include "api/kinds/kind.h"

#include "base/base64.h"

/* extra (map[string]ExtraValue) is not transcribed */
STRUCT_PARTIAL(csr_spec, "CertificateSigningRequestSpec", F(1, "request", kite_schema_bytes), F(7, "signerName", S),
       F(8, "expirationSeconds", I32), F(5, "usages", SLIST), F(2, "username", S), F(3, "uid", S),
       F(4, "groups", SLIST));
STRUCT(csr_condition, "CertificateSigningRequestCondition", F(1, "type", S), F(6, "status", S), F(2, "reason", S),
       F(3, "message", S), F(4, "lastUpdateTime", T), F(5, "lastTransitionTime", T));
LIST(csr_conditions, NULL, csr_condition);
STRUCT(csr_status, "CertificateSigningRequestStatus", F(1, "conditions", csr_conditions),
       F(2, "certificate", kite_schema_bytes));
ROOT(kite_schema_csr, "CertificateSigningRequest", TYPE_META, F(2, "spec", csr_spec), F(3, "status", csr_status));

/* Key usages Kubernetes accepts (certificates/v1 KeyUsage). */
static const char *const USAGES[] = {
    "signing", "digital signature", "content commitment", "key encipherment", "key agreement",
    "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
    "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
    "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
};

static bool known_usage(const char *u) {
    for (size_t i = 0; i < KITE_ARRAY_SIZE(USAGES); i++)
        if (strcmp(USAGES[i], u) == 0) return true;
    return false;
}

/* "example.com/path": a DNS subdomain, a slash, a path of DNS-label-ish characters. */
static bool signer_name_ok(const char *s) {
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || !slash[1] || slash - s > 253) return false;
    for (const char *p = s; p < slash; p++)
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-' || *p == '.')) return false;
    for (const char *p = slash + 1; *p; p++)
        if (!(isalnum((unsigned char)*p) || strchr("-._/", *p))) return false;
    return true;
}

static bool has_pem_block(const char *b64, const char *type) {
    size_t len = 0;
    _cleanup_free_ char *pem = NULL;
    if (kite_base64_decode(b64, &pem, &len) < 0) return false;
    _cleanup_free_ char *want = kite_asprintf("-----BEGIN %s-----", type);
    return pem && len && memmem(pem, len, want, strlen(want)) != NULL;
}

static void validate(json_object *obj, json_object *old, struct kite_causes *c) {
    json_object *spec = OBJ(obj, "spec");
    const char *req = STR(spec, "request"), *signer = STR(spec, "signerName");
    if (!*req)
        kite_causes_add(c, "FieldValueRequired", "spec.request", "Required value");
    else if (!has_pem_block(req, "CERTIFICATE REQUEST"))
        kite_causes_add(c, "FieldValueInvalid", "spec.request", "Invalid value: []byte{...}: PEM block type must be CERTIFICATE REQUEST");
    if (!*signer)
        kite_causes_add(c, "FieldValueRequired", "spec.signerName", "Required value");
    else if (!signer_name_ok(signer))
        kite_causes_add(c, "FieldValueInvalid", "spec.signerName",
                        "Invalid value: \"%s\": must be a fully qualified domain and path of the form 'example.com/signer-name'", signer);
    json_object *exp = OBJ(spec, "expirationSeconds");
    if (exp && int_of(exp) < 600)
        kite_causes_add(c, "FieldValueInvalid", "spec.expirationSeconds", "Invalid value: %lld: may not specify a duration less than 600 seconds (10 minutes)",
                        (long long)int_of(exp));
    json_object *usages = OBJ(spec, "usages");
    if (!arr_len(usages)) kite_causes_add(c, "FieldValueRequired", "spec.usages", "Required value");
    for (size_t i = 0; i < arr_len(usages); i++) {
        const char *u = str_of(json_object_array_get_idx(usages, i));
        char f[48];
        snprintf(f, sizeof f, "spec.usages[%zu]", i);
        if (!known_usage(u)) kite_causes_add(c, "FieldValueNotSupported", f, "Unsupported value: \"%s\"", u);
        for (size_t j = 0; j < i; j++)
            if (strcmp(u, str_of(json_object_array_get_idx(usages, j))) == 0)
                kite_causes_add(c, "FieldValueDuplicate", f, "Duplicate value: \"%s\"", u);
    }
    /* conditions: one of each type; Approved and Denied exclude each other */
    json_object *conds = OBJ(obj, "status", "conditions");
    bool approved = false, denied = false;
    for (size_t i = 0; i < arr_len(conds); i++) {
        json_object *cd = json_object_array_get_idx(conds, i);
        const char *t = STR(cd, "type");
        char f[64];
        snprintf(f, sizeof f, "status.conditions[%zu].type", i);
        if (!*t) kite_causes_add(c, "FieldValueRequired", f, "Required value");
        for (size_t j = 0; *t && j < i; j++)
            if (strcmp(t, STR(json_object_array_get_idx(conds, j), "type")) == 0)
                kite_causes_add(c, "FieldValueDuplicate", f, "Duplicate value: \"%s\"", t);
        approved = approved || strcmp(t, "Approved") == 0;
        denied = denied || strcmp(t, "Denied") == 0;
        snprintf(f, sizeof f, "status.conditions[%zu].status", i);
        const char *st = STR(cd, "status");
        if (*st && strcmp(st, "True") && strcmp(st, "False") && strcmp(st, "Unknown"))
            kite_causes_add(c, "FieldValueNotSupported", f, "Unsupported value: \"%s\": supported values: \"False\", \"True\", \"Unknown\"", st);
    }
    if (approved && denied)
        kite_causes_add(c, "FieldValueInvalid", "status.conditions", "Invalid value: \"Approved\": Approved and Denied conditions are mutually exclusive");
    const char *cert = STR(obj, "status", "certificate");
    if (*cert && !has_pem_block(cert, "CERTIFICATE"))
        kite_causes_add(c, "FieldValueInvalid", "status.certificate", "Invalid value: \"<certificate data>\": must contain at least one CERTIFICATE PEM block");
    if (old) {
        json_object *ospec = OBJ(old, "spec");
        if (!json_object_equal(spec, ospec))
            kite_causes_add(c, "FieldValueForbidden", "spec", "Forbidden: field is immutable");
        const char *ocert = STR(old, "status", "certificate");
        if (*ocert && strcmp(ocert, cert) != 0)
            kite_causes_add(c, "FieldValueForbidden", "status.certificate", "Forbidden: updates may not modify existing certificate content");
    }
}

/* ---- printer: NAME AGE SIGNERNAME REQUESTOR REQUESTEDDURATION CONDITION ---- */

static json_object *csr_signer(const struct kite_table_row *r) { return cell_str(STR(r->obj, "spec", "signerName")); }
static json_object *csr_requestor(const struct kite_table_row *r) { return cell_str(STR(r->obj, "spec", "username")); }
static json_object *csr_duration(const struct kite_table_row *r) {
    json_object *e = OBJ(r->obj, "spec", "expirationSeconds");
    if (!e) return cell_str("<none>");
    char out[32];
    kite_human_duration(int_of(e), out);
    return cell_str(out);
}
/* Approved,Issued / Denied / Failed / Pending, as kubectl's printer. */
static json_object *csr_condition_cell(const struct kite_table_row *r) {
    struct kite_buf b = {0};
    json_object *conds = OBJ(r->obj, "status", "conditions");
    for (size_t i = 0; i < arr_len(conds); i++) {
        const char *t = STR(json_object_array_get_idx(conds, i), "type");
        if (!*t) continue;
        if (b.len) kite_buf_putc(&b, ',');
        kite_buf_puts(&b, t);
    }
    if (!b.len) kite_buf_puts(&b, "Pending");
    if (*STR(r->obj, "status", "certificate")) kite_buf_puts(&b, ",Issued");
    json_object *cell = cell_str(b.p);
    kite_buf_release(&b);
    return cell;
}

static const struct kite_table_column cols[] = {
    COL_NAME,
    COL_AGE,
    {"SignerName", csr_signer, "string", "", "Name of the signer the request is addressed to.", 0},
    {"Requestor", csr_requestor, "string", "", "Name of the user that created the request.", 0},
    {"RequestedDuration", csr_duration, "string", "", "Requested validity of the issued certificate.", 0},
    {"Condition", csr_condition_cell, "string", "", "Approval conditions, and Issued once signed.", 0},
};
static const struct kite_table_printer printer = TABLE_PRINTER(cols);

static const struct kite_subresource subresources[] = {{.name = "approval", .field = "status", .update_only = false},
                                                       {0}};
static const char *const fields[] = {"spec.signerName", NULL};

const struct kite_resource kite_kind_csr = {
    .schema = &kite_schema_csr,
    KITE_GROUP_VERSION("certificates.k8s.io", "v1"), .kind = "CertificateSigningRequest",
    .list_kind = "CertificateSigningRequestList", .plural = "certificatesigningrequests",
    .singular = "certificatesigningrequest", .short_names = {"csr"}, .has_status = true,
    .smp = &kite_meta_smp_schema, .table = &printer, .validate = validate, .subresources = subresources,
    .fields = fields, .spec_requester = true,
    /* "We don't care what you call your certificate requests" (upstream's validation): the
     * kubelet's names hold base64url digests, upper case included */
    .name_rule = KITE_NAME_PATH_SEGMENT,
};
