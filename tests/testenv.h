/*
 * testenv.h - where the tests find the real model files.
 *
 * A model is taken from the environment variable ENV when it is set (e.g.
 * PARLEY_TEST_MODEL), else from the model cache the setup script fills:
 * ${XDG_CACHE_HOME:-$HOME/.cache}/parley/models/FILE (an XDG_CACHE_HOME that
 * is not absolute is ignored, as the XDG specification says).
 */
#ifndef PARLEY_TESTENV_H
#define PARLEY_TESTENV_H

#include <stdio.h>
#include <stdlib.h>

/* The default chat model. */
#define TESTENV_SMOLLM2 "SmolLM2-135M-Instruct.Q4_1.gguf"

/* Write the path of model FILE (override: $ENV) into BUF; returns BUF. */
static inline const char *testenv_model_file(const char *env, const char *file,
                                             char *buf, size_t n)
{
	const char *p = getenv(env), *cache = getenv("XDG_CACHE_HOME");
	const char *home = getenv("HOME");

	if (p != NULL && p[0] != '\0')
		snprintf(buf, n, "%s", p);
	else if (cache != NULL && cache[0] == '/')
		snprintf(buf, n, "%s/parley/models/%s", cache, file);
	else
		snprintf(buf, n, "%s/.cache/parley/models/%s", home ? home : "",
		         file);
	return buf;
}

/* The default model: $PARLEY_TEST_MODEL or the cache's SmolLM2. */
static inline const char *testenv_model(char *buf, size_t n)
{
	return testenv_model_file("PARLEY_TEST_MODEL", TESTENV_SMOLLM2, buf, n);
}

#endif /* PARLEY_TESTENV_H */
