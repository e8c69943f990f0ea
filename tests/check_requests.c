/*
 * check_requests.c - the request stream of `kvlab serving`
 * (bench/serve/requests.h): the generator's arrivals are a Poisson process
 * of the asked rate and its lengths follow their distributions within the
 * context; a seed repeats a stream; the presets; every refusal of the
 * generator and of the trace reader, the latter naming the file's line.
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../bench/serve/requests.h"

#define N_DRAWS 20000

static struct kv_workload base(void)
{
    return (struct kv_workload){.rate = 4.0, .n_requests = N_DRAWS,
                                .prompt = {KV_LEN_LOGNORMAL, 100.0, 80.0},
                                .output = {KV_LEN_UNIFORM, 50.0, 20.0}, .seed = 7};
}

START_TEST(test_generate_shape)
{
    struct kv_workload w = base();
    struct kv_request_set s;
    char why[256] = "";
    ck_assert_int_eq(kv_requests_generate(&s, &w, 8192, why, sizeof why), KV_OK);
    ck_assert_int_eq(s.n, N_DRAWS);
    double prompt = 0, gaps = 0;
    for (int32_t i = 0; i < s.n; i++) {
        const struct kv_request *r = &s.req[i];
        ck_assert(r->arrival_s >= (i > 0 ? s.req[i - 1].arrival_s : 0.0));
        ck_assert_int_ge(r->prompt, 1);
        ck_assert_int_ge(r->output, 30);
        ck_assert_int_le(r->output, 70);
        ck_assert_int_le(r->prompt + r->output, 8192);
        ck_assert_int_eq(r->group, -1);
        prompt += r->prompt;
    }
    gaps = s.req[s.n - 1].arrival_s / s.n;
    /* the sample means of 20000 draws: within 5% (their standard errors are
     * under 1%) */
    ck_assert_msg(fabs(gaps * w.rate - 1.0) < 0.05, "mean gap %g s at rate %g", gaps, w.rate);
    ck_assert_msg(fabs(prompt / s.n / 100.0 - 1.0) < 0.05, "mean prompt %g", prompt / s.n);
    kv_request_set_free(&s);
}
END_TEST

START_TEST(test_generate_fixed_groups_seed)
{
    struct kv_workload w = base();
    w.n_requests = 100;
    w.prompt = (struct kv_len_spec){KV_LEN_FIXED, 40.0, 0.0};
    w.output = (struct kv_len_spec){KV_LEN_FIXED, 500.0, 0.0};
    w.n_groups = 3;
    w.prefix_len = 30;
    struct kv_request_set a, b, c;
    ck_assert_int_eq(kv_requests_generate(&a, &w, 512, NULL, 0), KV_OK);
    ck_assert_int_eq(a.n_groups, 3);
    ck_assert_int_eq(a.prefix_len, 30);
    for (int32_t i = 0; i < a.n; i++) {
        ck_assert_int_eq(a.req[i].prompt, 70);
        ck_assert_int_eq(a.req[i].output, 512 - 70); /* clipped to the context */
        ck_assert_int_eq(a.req[i].group, i % 3);
    }
    ck_assert_int_eq(kv_requests_generate(&b, &w, 512, NULL, 0), KV_OK);
    ck_assert_mem_eq(a.req, b.req, (size_t)a.n * sizeof *a.req);
    w.seed++;
    ck_assert_int_eq(kv_requests_generate(&c, &w, 512, NULL, 0), KV_OK);
    ck_assert(a.req[0].arrival_s != c.req[0].arrival_s);
    kv_request_set_free(&a);
    kv_request_set_free(&b);
    kv_request_set_free(&c);
}
END_TEST

START_TEST(test_generate_refused)
{
    struct kv_request_set s;
    char why[256];
    const double rates[] = {0.0, -1.0, NAN, INFINITY};
    for (size_t i = 0; i < sizeof rates / sizeof *rates; i++) {
        struct kv_workload w = base();
        w.rate = rates[i];
        why[0] = '\0';
        ck_assert_int_eq(kv_requests_generate(&s, &w, 8192, why, sizeof why), KV_ERR_INVALID);
        ck_assert_msg(strstr(why, "rate") != NULL, "rate %g: %s", rates[i], why);
        ck_assert_ptr_null(s.req);
    }
    struct kv_workload w = base();
    w.n_requests = 0;
    ck_assert_int_eq(kv_requests_generate(&s, &w, 8192, why, sizeof why), KV_ERR_INVALID);
    w = base();
    w.prompt.spread = -1.0;
    ck_assert_int_eq(kv_requests_generate(&s, &w, 8192, why, sizeof why), KV_ERR_INVALID);
    w = base();
    w.output.mean = 0.5;
    ck_assert_int_eq(kv_requests_generate(&s, &w, 8192, why, sizeof why), KV_ERR_INVALID);
    w = base();
    w.output.spread = NAN;
    ck_assert_int_eq(kv_requests_generate(&s, &w, 8192, why, sizeof why), KV_ERR_INVALID);
    w = base();
    w.n_groups = KV_REQ_MAX_GROUPS + 1;
    w.prefix_len = 4;
    ck_assert_int_eq(kv_requests_generate(&s, &w, 8192, why, sizeof why), KV_ERR_INVALID);
    w = base();
    w.n_groups = 2;
    w.prefix_len = 8191;
    ck_assert_int_eq(kv_requests_generate(&s, &w, 8192, why, sizeof why), KV_ERR_INVALID);
    ck_assert_int_eq(kv_requests_generate(NULL, &w, 8192, why, sizeof why), KV_ERR_INVALID);
}
END_TEST

START_TEST(test_presets)
{
    struct kv_workload chat = base(), ins = base();
    ck_assert_int_eq(kv_workload_preset(&chat, "chat", 8192), KV_OK);
    ck_assert_int_eq(kv_workload_preset(&ins, "instruct", 8192), KV_OK);
    ck_assert(chat.output.mean > 4 * ins.output.mean);
    ck_assert(chat.output.spread > ins.output.spread);
    struct kv_workload small = base();
    ck_assert_int_eq(kv_workload_preset(&small, "chat", 512), KV_OK);
    ck_assert(fabs(small.output.mean * 4 - chat.output.mean) < 1e-9); /* scaled to the context */
    ck_assert_int_eq(kv_workload_preset(&small, "chatty", 512), KV_ERR_INVALID);
    for (int i = 0; kv_workload_preset_names[i] != NULL; i++)
        ck_assert_int_eq(kv_workload_preset(&small, kv_workload_preset_names[i], 64), KV_OK);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Traces                                                                   */

static char trace_path[64];

static const char *trace(const char *text)
{
    strcpy(trace_path, "/tmp/kvlab_trace.XXXXXX");
    int fd = mkstemp(trace_path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return trace_path;
}

START_TEST(test_trace_read)
{
    struct kv_request_set s;
    char why[256] = "";
    const char *p = trace("# a trace\narrival_s,prompt_tokens,output_tokens,prefix_id\n"
                          "0,20,5,1\n0.5,8,100,\n0.5,30,1,-1\n2.25,40,2,0\n");
    ck_assert_msg(kv_requests_read(&s, p, 256, 2, 16, why, sizeof why) == KV_OK, "%s", why);
    unlink(p);
    ck_assert_int_eq(s.n, 4);
    ck_assert_int_eq(s.n_groups, 2);
    ck_assert_int_eq(s.req[0].group, 1);
    ck_assert_int_eq(s.req[1].group, -1);
    ck_assert_int_eq(s.req[2].group, -1);
    ck_assert_int_eq(s.req[3].prompt, 40);
    ck_assert(s.req[3].arrival_s == 2.25);
    kv_request_set_free(&s);

    p = trace("arrival_s,prompt_tokens,output_tokens\n1,3,4\n");
    ck_assert_int_eq(kv_requests_read(&s, p, 7, 0, 0, why, sizeof why), KV_OK);
    unlink(p);
    ck_assert_int_eq(s.req[0].group, -1);
    kv_request_set_free(&s);
}
END_TEST

START_TEST(test_trace_refused)
{
    static const struct {
        const char *text, *want;
    } bad[] = {
        {"arrival_s,prompt_tokens,output_tokens\n1,3,4\n0.5,3,4\n", ":3: arrival_s '0.5' is before"},
        {"arrival_s,prompt_tokens,output_tokens\n-1,3,4\n", ":2: arrival_s '-1'"},
        {"arrival_s,prompt_tokens,output_tokens\nnan,3,4\n", ":2: arrival_s 'nan'"},
        {"arrival_s,prompt_tokens,output_tokens\n0,0,4\n", ":2: prompt_tokens '0'"},
        {"arrival_s,prompt_tokens,output_tokens\n0,3,-2\n", ":2: output_tokens '-2'"},
        {"arrival_s,prompt_tokens,output_tokens\n0,3,x\n", ":2: output_tokens 'x'"},
        {"arrival_s,prompt_tokens,output_tokens\n0,60,5\n",
         ":2: prompt_tokens + output_tokens (60 + 5) pass the model's context of 64 tokens"},
        {"arrival_s,prompt_tokens,output_tokens,prefix_id\n0,30,5,2\n", ":2: prefix_id '2' names no"},
        {"arrival_s,prompt_tokens,output_tokens,prefix_id\n0,16,5,0\n", ":2: prompt_tokens '16' does not exceed"},
        {"arrival_s,prompt,output_tokens\n0,3,4\n", ":1: a trace needs the columns"},
        {"arrival_s,prompt_tokens,output_tokens\n", ":1: a trace holds 1 to"},
        {"arrival_s,prompt_tokens,output_tokens\n0,3\n", ":2:"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct kv_request_set s;
        char why[256] = "";
        const char *p = trace(bad[i].text);
        ck_assert_int_eq(kv_requests_read(&s, p, 64, 2, 16, why, sizeof why), KV_ERR_FORMAT);
        unlink(p);
        ck_assert_msg(strstr(why, bad[i].want) != NULL, "case %zu: '%s' not in '%s'", i,
                      bad[i].want, why);
        ck_assert_ptr_null(s.req);
        ck_assert_ptr_null(strchr(why, '\n'));
    }
    struct kv_request_set s;
    char why[256] = "";
    ck_assert_int_eq(kv_requests_read(&s, "/nonexistent/trace.csv", 64, 0, 0, why, sizeof why),
                     KV_ERR_IO);
    ck_assert_int_eq(kv_requests_read(&s, "x", 64, KV_REQ_MAX_GROUPS + 1, 4, why, sizeof why),
                     KV_ERR_INVALID);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("requests");
    TCase *tc = tcase_create("requests");
    tcase_add_test(tc, test_generate_shape);
    tcase_add_test(tc, test_generate_fixed_groups_seed);
    tcase_add_test(tc, test_generate_refused);
    tcase_add_test(tc, test_presets);
    tcase_add_test(tc, test_trace_read);
    tcase_add_test(tc, test_trace_refused);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
