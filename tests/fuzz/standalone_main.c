/* A main for the fuzz targets when built without libFuzzer (gcc): runs every
 * corpus file given (files or folders), then, with -seconds=N, a simple
 * seeded mutation loop over them for N seconds. The same harness builds
 * with clang -fsanitize=fuzzer, where libFuzzer's main replaces this one. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_INPUTS 4096
static uint8_t *inputs[MAX_INPUTS];
static size_t sizes[MAX_INPUTS];
static int n_inputs;

/* A buffer of exactly n bytes, as libFuzzer passes: under ASan, a read
 * one past the input's end is caught instead of landing in slack. */
static uint8_t *exact_copy(const uint8_t *data, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        abort();
    memcpy(p, data, n);
    return p;
}

static void load_file(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp || n_inputs == MAX_INPUTS) {
        if (fp)
            fclose(fp);
        return;
    }
    uint8_t *buf = malloc(1 << 20);
    size_t n = fread(buf, 1, 1 << 20, fp);
    fclose(fp);
    inputs[n_inputs] = exact_copy(buf, n);
    sizes[n_inputs++] = n;
    free(buf);
}

static void load(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return;
    if (!S_ISDIR(st.st_mode)) {
        load_file(path);
        return;
    }
    DIR *d = opendir(path);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        load_file(p);
    }
    if (d)
        closedir(d);
}

int main(int argc, char **argv)
{
    double seconds = 0;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "-seconds=", 9) == 0)
            seconds = atof(argv[i] + 9);
        else if (argv[i][0] != '-')
            load(argv[i]);
    }
    for (int i = 0; i < n_inputs; i++)
        LLVMFuzzerTestOneInput(inputs[i], sizes[i]);
    printf("ok 1 - %d corpus inputs ran clean\n", n_inputs);
    long runs = 0;
    if (seconds > 0 && n_inputs > 0) {
        srand(12345);
        time_t end = time(NULL) + (time_t)seconds;
        uint8_t *buf = malloc(1 << 16);
        while (time(NULL) < end) {
            for (int k = 0; k < 1000; k++, runs++) {
                int i = rand() % n_inputs;
                size_t n = sizes[i] < (1 << 16) ? sizes[i] : (1 << 16);
                memcpy(buf, inputs[i], n);
                int edits = 1 + rand() % 8;
                for (int j = 0; j < edits && n; j++) {
                    size_t at = (size_t)rand() % n;
                    switch (rand() % 4) {
                    case 0: buf[at] = (uint8_t)rand(); break;                 /* replace */
                    case 1: n = at; break;                                     /* truncate */
                    case 2: buf[at] ^= (uint8_t)(1u << (rand() % 8)); break;  /* flip a bit */
                    default: /* splice a piece of another input */
                        if (n_inputs > 1) {
                            int o = rand() % n_inputs;
                            size_t take = sizes[o] ? (size_t)rand() % sizes[o] : 0;
                            if (at + take > (1 << 16))
                                take = (1 << 16) - at;
                            memcpy(buf + at, inputs[o], take);
                            if (at + take > n)
                                n = at + take;
                        }
                    }
                }
                uint8_t *exact = exact_copy(buf, n);
                LLVMFuzzerTestOneInput(exact, n);
                free(exact);
            }
        }
        free(buf);
    }
    printf("ok 2 - %ld mutated inputs ran clean\n1..2\n", runs);
    return 0;
}
