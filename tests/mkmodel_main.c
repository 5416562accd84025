/*
 * mkmodel_main.c - the stand-alone parley-mkmodel program (the same code
 * as the hidden `parley dev-mkmodel`): random-weight GGUF models.
 */
#include "cmd.h"

int main(int argc, char **argv)
{
	return cmd_mkmodel(argc, argv);
}
