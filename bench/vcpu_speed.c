/* The two vCPUs' compute speed, each pinned: an FMA loop (12 independent
 * 512-bit chains) on CPU 0 and CPU 1 at once, then each alone, for 0.5 s
 * each; prints vector FMAs per ns. On the shared 2-core VM the two differ
 * by up to ~17 % at times (docs/PERFORMANCE.md, session 10), which static
 * task splits feel. Not a test.
 *   cc -O2 -mavx512f -mfma -o /tmp/vcpu_speed bench/vcpu_speed.c -lpthread
 *   chrt -f 10 /tmp/vcpu_speed */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#include <immintrin.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static double rate[2];
static void *run(void *a){ long cpu=(long)a; cpu_set_t s; CPU_ZERO(&s); CPU_SET(cpu,&s); pthread_setaffinity_np(pthread_self(),sizeof s,&s);
 __m512 x[12]; for(int i=0;i<12;i++) x[i]=_mm512_set1_ps(1.0f+i*1e-7f); __m512 m=_mm512_set1_ps(0.9999999f), c=_mm512_set1_ps(1e-7f);
 long it=0; double t0=now(); while(now()-t0<0.5){ for(int k=0;k<1000;k++) for(int i=0;i<12;i++) x[i]=_mm512_fmadd_ps(x[i],m,c); it+=1000;}
 float f[16]; __m512 s2=x[0]; for(int i=1;i<12;i++) s2=_mm512_add_ps(s2,x[i]); _mm512_storeu_ps(f,s2);
 rate[cpu]=it*12/(now()-t0)/1e9; return (void*)(long)f[0]; }
int main(){ pthread_t t[2]; for(long i=0;i<2;i++) pthread_create(&t[i],0,run,(void*)i); for(int i=0;i<2;i++) pthread_join(t[i],0);
 printf("both: cpu0 %.2f cpu1 %.2f GFMA-vec/s\n", rate[0], rate[1]);
 pthread_create(&t[0],0,run,(void*)0); pthread_join(t[0],0); pthread_create(&t[1],0,run,(void*)1); pthread_join(t[1],0);
 printf("alone: cpu0 %.2f cpu1 %.2f\n", rate[0], rate[1]); }
