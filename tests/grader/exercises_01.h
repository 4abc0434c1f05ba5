/* exercises_01.h - chapter 01's exercises (filled in by the chapter). */
